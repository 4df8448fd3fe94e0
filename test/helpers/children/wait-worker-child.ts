// A worker in its own process for test/queue.wait-for-job.test.ts: returns { doubled } for { n }, and throws for { fail: true }.

import { Worker } from '../../../src/index.js'

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`wait-worker-child: ${name} is not set`)
  return value
}

const worker = new Worker<{ n: number; fail?: boolean }, { doubled: number }>(
  env('QUEUE'),
  async (job) => {
    if (job.data.fail === true) throw new Error(`boom ${job.data.n}`)
    return { doubled: job.data.n * 2 }
  },
  { connectionString: env('PGONCE_URL'), schema: env('PGONCE_SCHEMA'), pollIntervalMs: 200, migrate: false },
)
worker.on('error', (err) => process.stderr.write(`wait-worker-child error: ${err.message}\n`))
process.once('SIGTERM', () => void worker.close().then(() => process.exit(0)))
await worker.run()
process.stdout.write('ready\n')
