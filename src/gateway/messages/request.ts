/**
 * The Anthropic Messages request, as far as the gateway reads it: routing, validation, and translation for providers
 * that do not speak it. Other fields pass through untouched to Anthropic.
 */

export type ContentBlock =
  | { readonly type: "text"; readonly text: string }
  | {
    readonly type: "image"
    readonly source: { readonly type: "base64"; readonly media_type: string; readonly data: string } | { readonly type: "url"; readonly url: string }
  }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }
  | { readonly type: "tool_result"; readonly tool_use_id: string; readonly content?: string | ReadonlyArray<ContentBlock>; readonly is_error?: boolean }
  | { readonly type: "thinking"; readonly thinking: string; readonly signature?: string }
  | { readonly type: string; readonly [key: string]: unknown }

export interface MessageParam {
  /** `user`, `assistant`; Claude Code also places `system` turns between them */
  readonly role: string
  readonly content: string | ReadonlyArray<ContentBlock>
}

export interface ToolParam {
  readonly type?: string
  readonly name: string
  readonly description?: string
  readonly input_schema?: object
}

export interface MessagesRequest {
  readonly model: string
  readonly messages: ReadonlyArray<MessageParam>
  readonly system?: string | ReadonlyArray<{ readonly type: string; readonly text?: string }>
  readonly max_tokens?: number
  readonly stream?: boolean
  readonly stop_sequences?: ReadonlyArray<string>
  readonly temperature?: number
  readonly top_p?: number
  readonly tools?: ReadonlyArray<ToolParam>
  readonly tool_choice?: { readonly type: string; readonly name?: string; readonly disable_parallel_tool_use?: boolean }
  readonly thinking?: { readonly type: string; readonly budget_tokens?: number }
  readonly output_config?: { readonly effort?: string }
  readonly metadata?: { readonly user_id?: string }
}
