import type { TestProject } from 'vitest/node'
import { startPostgres } from '../dev/postgres-server.js'

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string
  }
}

const verbose = process.env.PGONCE_TEST_VERBOSE === '1'

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = Date.now()
  const server = await startPostgres((msg) => {
    // Embedded server output is noisy; only show it when asked to.
    if (verbose || !msg.startsWith('postgres[embedded]:')) process.stderr.write(`[global-setup] ${msg}\n`)
  })
  process.stderr.write(`[global-setup] postgres kind=${server.kind} ready in ${Date.now() - started}ms\n`)
  project.provide('databaseUrl', server.url)

  return async () => {
    await server.stop()
    process.stderr.write(`[global-setup] postgres (${server.kind}) stopped\n`)
  }
}
