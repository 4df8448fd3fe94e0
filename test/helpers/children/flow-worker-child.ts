// A worker in its own process for the flow-control tests: records each run's start and end (database clock) in
// <schema>.runs. A job's data says what its handler does: holdMs (sleep), hang (never finish), fail (throw),
// rateLimitMs (ctx.rateLimit on its first run, of rateLimitScope); group is recorded with the run.

import pg from 'pg'
import { Worker } from '../../../src/index.js'

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`flow-worker-child: ${name} is not set`)
  return value
}
const url = env('PGONCE_URL')
const schema = env('PGONCE_SCHEMA')
const pool = new pg.Pool({ connectionString: url, max: 2 })

interface Data {
  holdMs?: number
  hang?: boolean
  fail?: boolean
  rateLimitMs?: number
  rateLimitScope?: 'queue' | 'group'
  group?: string
}

const worker = new Worker<Data>(
  env('QUEUE'),
  async (job, ctx) => {
    const { rows } = await pool.query<{ id: string }>(
      `insert into "${schema}".runs (job_id, pid, attempt, group_id, started_at)
       values ($1, $2, $3, $4, clock_timestamp()) returning id`,
      [job.id, process.pid, job.attempts, job.data.group ?? null],
    )
    const run = rows[0]!.id
    try {
      if (job.data.hang) await new Promise(() => {})
      if (job.data.holdMs) await new Promise((r) => setTimeout(r, job.data.holdMs))
      if (job.data.rateLimitMs !== undefined) {
        // Only on the job's first run: the run it gives back is not counted in job.attempts.
        const runs = await pool.query(`select 1 from "${schema}".runs where job_id = $1`, [job.id])
        if (runs.rowCount === 1)
          await ctx.rateLimit(job.data.rateLimitMs, { scope: job.data.rateLimitScope ?? 'queue' })
      }
      if (job.data.fail) throw new Error('asked to fail')
      return { by: process.pid }
    } finally {
      await pool.query(`update "${schema}".runs set ended_at = clock_timestamp() where id = $1`, [run])
    }
  },
  {
    connectionString: url,
    schema,
    concurrency: Number(process.env.CONCURRENCY ?? 4),
    batchSize: Number(process.env.BATCH ?? 8),
    leaseMs: Number(process.env.LEASE_MS ?? 30_000),
    pollIntervalMs: Number(process.env.POLL_MS ?? 200),
    maintenanceIntervalMs: Number(process.env.MAINTENANCE_MS ?? 500),
    migrate: false,
  },
)
worker.on('error', (err) => process.stderr.write(`flow-worker-child error: ${err.message}\n`))

process.once('SIGTERM', () => {
  void worker
    .close()
    .then(() => pool.end())
    .then(() => process.exit(0))
})
await worker.run()
process.stdout.write('ready\n')
