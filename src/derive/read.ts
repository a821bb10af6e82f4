/**
 * A capture as the call view, whichever API it was made on: chat completions, the Responses API, Anthropic
 * Messages or embeddings.
 */
import { type Capture, captureApi } from "../domain/capture.ts"
import { type ChatCall, readChatCall } from "./chatCall.ts"
import { readEmbeddingsCall } from "./embeddings.ts"
import { readMessagesCall } from "./messages.ts"
import { readResponsesCall } from "./responses.ts"

export const readCall = (capture: Capture): ChatCall => {
  switch (captureApi(capture)) {
    case "chat":
      return readChatCall(capture)
    case "responses":
      return readResponsesCall(capture)
    case "messages":
      return readMessagesCall(capture)
    case "embeddings":
      return readEmbeddingsCall(capture)
  }
}
