// A worker whose handler ignores its signal and blocks its event loop (a synchronous wait until the file UNBLOCK
// exists), for test/worker.timeout-process.test.ts: no timer of the worker can run meanwhile. Prints JSON lines: ready,
// started, returned, and the worker's completed, failed and error events; a crash as {crash}.

import { existsSync } from 'node:fs'
import { Worker } from '../../../src/index.js'

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`timeout-child: ${name} is not set`)
  return value
}
const say = (message: Record<string, unknown>): boolean => process.stdout.write(`${JSON.stringify(message)}\n`)
process.on('unhandledRejection', (reason) => say({ crash: String(reason) }))
process.on('uncaughtException', (err) => say({ crash: err.message }))

const unblock = env('UNBLOCK')
const pause = new Int32Array(new SharedArrayBuffer(4))
const worker = new Worker(
  env('QUEUE'),
  (job) => {
    say({ started: job.id })
    // Blocks the thread (no event loop turn, no timer) until the test says so.
    while (!existsSync(unblock)) Atomics.wait(pause, 0, 0, 10)
    say({ returned: job.id })
    return 'late result'
  },
  {
    connectionString: env('PGONCE_URL'),
    schema: env('PGONCE_SCHEMA'),
    concurrency: 1,
    leaseMs: 30_000,
    pollIntervalMs: 100,
    maintenanceIntervalMs: 0,
    migrate: false,
  },
)
worker.on('completed', (job) => say({ completed: job.id }))
worker.on('failed', (job, err) => say({ failed: job.id, state: job.state, error: err.name }))
worker.on('error', (err) => say({ error: err.name }))

process.once('SIGTERM', () => {
  void worker.close().then(() => process.exit(0))
})
await worker.run()
say({ ready: true })
