// First add benchmark: adds/s of one sequential producer, 16 concurrent producers, and bulk batches of 1,000.
// Run: `npx tsx bench/adds.ts` (DATABASE_URL, else a container or embedded Postgres; BENCH_SCALE scales the sizes).

import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { Queue, migrate } from '../src/index.js'
import { startPostgres } from '../dev/postgres-server.js'
import { percentile, perSecond, runProducers } from './measure.js'

const scale = Number(process.env.BENCH_SCALE ?? '1')
if (!(scale > 0)) throw new Error(`BENCH_SCALE must be a positive number, got ${process.env.BENCH_SCALE}`)
const size = (n: number) => Math.max(1, Math.round(n * scale))
const SEQUENTIAL = size(2_000)
const CONCURRENT = size(10_000)
const PRODUCERS = 16
const BATCH = 1_000
const BULK = Math.max(BATCH, size(50_000))

interface Figure {
  workload: string
  jobs: number
  ms: number
  perSecond: number
  note: string
}

const server = await startPostgres((msg) => process.stderr.write(`${msg}\n`))
const schema = `bench_adds_${randomBytes(4).toString('hex')}`
const admin = new pg.Pool({ connectionString: server.url, max: 1 })
const queue = new Queue<{ i: number }>('bench', { connectionString: server.url, schema, poolSize: PRODUCERS })
const figures: Figure[] = []

async function stored(name: string): Promise<number> {
  const { rows } = await admin.query<{ n: number }>(`select count(*)::int as n from "${schema}".jobs where name = $1`, [name])
  return rows[0]?.n ?? 0
}

async function record(workload: string, jobs: number, ms: number, note = ''): Promise<void> {
  const count = await stored(workload)
  if (count !== jobs) throw new Error(`${workload}: ${count} jobs stored, expected ${jobs}`)
  figures.push({ workload, jobs, ms: Math.round(ms), perSecond: Math.round(perSecond(jobs, ms)), note })
}

try {
  await migrate({ connectionString: server.url, schema })
  await queue.addBulk(Array.from({ length: 100 }, (_, i) => ({ name: 'warmup', data: { i } })))
  for (let i = 0; i < 100; i++) await queue.add('warmup', { i })

  const latencies: number[] = []
  const sequentialMs = await runProducers(SEQUENTIAL, 1, async (i) => {
    const started = performance.now()
    await queue.add('sequential', { i })
    latencies.push(performance.now() - started)
  })
  await record('sequential', SEQUENTIAL, sequentialMs,
    `1 producer, awaited; p50 ${percentile(latencies, 50).toFixed(2)} ms, p99 ${percentile(latencies, 99).toFixed(2)} ms`)

  const concurrentMs = await runProducers(CONCURRENT, PRODUCERS, async (i) => {
    await queue.add('concurrent', { i })
  })
  await record('concurrent', CONCURRENT, concurrentMs, `${PRODUCERS} producers, pool of ${PRODUCERS}`)

  const batches = Math.ceil(BULK / BATCH)
  const bulkMs = await runProducers(batches, 1, async (b) => {
    const n = Math.min(BATCH, BULK - b * BATCH)
    await queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'bulk', data: { i: b * BATCH + i } })))
  })
  await record('bulk', BULK, bulkMs, `${batches} addBulk calls of ${BATCH}, one after another`)

  const { rows } = await admin.query<{ server_version: string }>('show server_version')
  process.stdout.write(`pgonce adds — Postgres ${rows[0]?.server_version} (${server.kind}), BENCH_SCALE=${scale}, ${new Date().toISOString()}\n`)
  console.table(figures)
} finally {
  await queue.close()
  await admin.query(`drop schema if exists "${schema}" cascade`)
  await admin.end()
  await server.stop()
}
