// Throughput under a held xmin horizon: jobs/s of a worker draining a kept-full queue, first with nothing holding
// the horizon back, then while an open REPEATABLE READ transaction that ran a query holds it for 60 s (every row
// version written meanwhile stays unvacuumable: the dead index entries of claimed and completed jobs pile up).
// Correctness under the same fault is test/fault/held-xmin.test.ts; this prints the two figures.
//
//   npx tsx bench/held-xmin.ts      (HELD_SECONDS=60, FREE_SECONDS=30 by default)
//
// Uses DATABASE_URL (else the dev starter's server), a fresh schema dropped at the end.

import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { startPostgres } from '../dev/postgres-server.js'
import { Queue, Worker, migrate } from '../src/index.js'

const HELD_S = Number(process.env.HELD_SECONDS ?? 60)
const FREE_S = Number(process.env.FREE_SECONDS ?? 30)
const BACKLOG = 2_000

const server = await startPostgres()
const url = server.url
const schema = `bench_xmin_${randomBytes(3).toString('hex')}`
await migrate({ connectionString: url, schema })
const pool = new pg.Pool({ connectionString: url, max: 2 })
const queue = new Queue('xmin', { connectionString: url, schema, migrate: false })
let completed = 0
const worker = new Worker('xmin', async () => {}, {
  connectionString: url, schema, concurrency: 16, pollIntervalMs: 200, maintenanceIntervalMs: 5_000, migrate: false,
})
worker.on('completed', () => completed++)
worker.on('error', (err) => process.stderr.write(`worker error: ${err.message}\n`))

let stopping = false
/** Keeps about BACKLOG jobs waiting: plain batches, with one keyed add per batch (jobId and dedup key paths). */
const producer = (async () => {
  for (let i = 0; !stopping; i++) {
    const { rows } = await pool.query<{ n: number }>(`select count(*)::int as n from "${schema}".jobs where state = 'waiting'`)
    if (rows[0]!.n < BACKLOG) {
      await queue.addBulk(Array.from({ length: 250 }, (_, n) => ({ name: 'p', data: { i, n } })))
      await queue.add('j', { i }, { jobId: `j-${i % 100}`, deduplication: { id: `k-${i % 100}` } })
    } else {
      await new Promise((r) => setTimeout(r, 20))
    }
  }
})()

/** Jobs completed per second over `seconds`, by the database clock. */
async function measure(seconds: number): Promise<number> {
  const clock = async () => (await pool.query<{ t: number }>('select extract(epoch from clock_timestamp())::float8 as t')).rows[0]!.t
  const startCount = completed
  const t0 = await clock()
  await new Promise((r) => setTimeout(r, seconds * 1000))
  return (completed - startCount) / ((await clock()) - t0)
}

const cleanup = async (): Promise<void> => {
  stopping = true
  await producer.catch(() => {})
  await worker.close()
  await queue.close()
  await pool.query(`drop schema if exists "${schema}" cascade`)
  await pool.end()
  await server.stop()
}
process.once('SIGINT', () => void cleanup().then(() => process.exit(130)))

try {
  await new Promise((r) => setTimeout(r, 3_000)) // warm-up: plans prepared, backlog built
  const free = await measure(FREE_S)
  process.stdout.write(`without a held xmin: ${free.toFixed(0)} jobs/s (${FREE_S} s)\n`)
  const holder = new pg.Client({ connectionString: url })
  await holder.connect()
  await holder.query('begin isolation level repeatable read')
  await holder.query(`select count(*) from "${schema}".jobs`)
  const held = await measure(HELD_S)
  const { rows } = await pool.query<{ dead: number }>(
    `select n_dead_tup::int as dead from pg_stat_user_tables where schemaname = $1 and relname = 'jobs'`, [schema])
  await holder.query('rollback')
  await holder.end()
  process.stdout.write(`with a held xmin:    ${held.toFixed(0)} jobs/s (${HELD_S} s; ${rows[0]?.dead ?? '?'} dead jobs rows at the end)\n`)
  process.stdout.write(`ratio held/free: ${(held / free).toFixed(2)}\n`)
} finally {
  await cleanup()
}
