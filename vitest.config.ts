import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // integration suites each create their own database; keep parallelism within the 2-core budget
    maxWorkers: 2,
    reporters: ["default"]
  }
})
