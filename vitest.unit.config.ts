import { defineConfig } from "vitest/config"
import base from "./vitest.config.ts"

// `npm run test:unit`: the unit tests alone — no database, no services, no test-only tools to install
export default defineConfig({
  ...base,
  test: { ...base.test, include: ["test/unit/**/*.test.ts"], globalSetup: [] }
})
