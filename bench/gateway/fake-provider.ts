/**
 * The fake providers in a process of their own for the gateway benchmark: no request recording, no pause
 * between streamed chunks. Prints `{"url": ...}` on stdout once listening; stops on SIGTERM.
 */
import { startFakeProviders } from "../../test/support/fake-providers.ts"

const fake = await startFakeProviders({ record: false, chunkDelayMs: 0 })
process.stdout.write(JSON.stringify({ url: fake.url }) + "\n")
process.on("SIGTERM", () => void fake.close().then(() => process.exit(0)))
