// A batch worker for test/worker.batch-kill.test.ts: records its batch, sends half of its jobs through ctx.for(job).effect,
// then (first attempt) hangs, to be SIGKILLed mid-batch.

import pg from 'pg'
import { Worker } from '../../../src/index.js'

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`batch-worker-child: ${name} is not set`)
  return value
}
const url = env('PGONCE_URL')
const schema = env('PGONCE_SCHEMA')
const pool = new pg.Pool({ connectionString: url, max: 2 })

const worker = new Worker<{ i: number }>(
  env('QUEUE'),
  async (jobs, ctx) => {
    await pool.query(`insert into "${schema}".batches (pid, job_ids) values ($1, $2)`, [
      process.pid,
      jobs.map((j) => j.id),
    ])
    for (const job of jobs.slice(0, Math.floor(jobs.length / 2))) {
      await ctx
        .for(job)
        .effect(`send:${job.data.i}`, (tx) =>
          tx.query(`insert into "${schema}".sent (i, job_id, pid) values ($1, $2, $3)`, [
            job.data.i,
            job.id,
            process.pid,
          ]),
        )
    }
    if (jobs.some((j) => j.attempts === 1)) await new Promise(() => {})
  },
  {
    connectionString: url,
    schema,
    batch: { size: Number(env('BATCH_SIZE')) },
    leaseMs: Number(env('LEASE_MS')),
    pollIntervalMs: 200,
    maintenanceIntervalMs: 0,
    poolSize: 3,
    migrate: false,
  },
)
worker.on('error', (err) => process.stderr.write(`batch-worker-child error: ${err.message}\n`))
await worker.run()
process.stdout.write('ready\n')
