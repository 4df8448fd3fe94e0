// A lab probe, not a benchmark: a Worker started on a small queue, then a backlog. Three jobs are added, the table is
// analysed (mode `analysed`) or not (`as-is`), the Worker starts and runs a dozen small batches (so that each of its
// pooled sessions has planned its statements), then N jobs arrive in bulk adds of 1,000 and are drained. Prints jobs/s
// over the adds and the drain, and how many sequential scans of the jobs table ran meanwhile (pg_stat_user_tables).
// A session's cached plan is made from the statistics of its moment: planned on a small table, a completion by a
// sequential scan read the whole table at every batch as it grew (bench/README.md, "Plans made on a small table").
//
//   DATABASE_URL=… N=50000 npx tsx dev/small-start-drain.ts [as-is|analysed] [package root]

import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import type * as PgonceApi from '../src/index.js'

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const mode = process.argv[2] ?? 'as-is'
const root = resolve(process.argv[3] ?? '.')
const { Queue, Worker, migrate } = (await import(pathToFileURL(`${root}/src/index.ts`).href)) as typeof PgonceApi
const N = Number(process.env.N ?? 50_000)
const schema = `probe_small_${Math.random().toString(16).slice(2, 8)}`
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
await migrate({ connectionString: url, schema })
const admin = new pg.Pool({ connectionString: url, max: 1 })
const queue = new Queue('small', { connectionString: url, schema, migrate: false })
let done = 0
const worker = new Worker('small', async () => { done++ }, { connectionString: url, schema, concurrency: 16, migrate: false })
worker.on('error', (err) => console.error(err.message))
const seqScans = async (): Promise<number> => Number((await admin.query<{ n: string }>(
  `select seq_scan as n from pg_stat_user_tables where schemaname = $1 and relname = 'jobs'`, [schema])).rows[0]?.n)
try {
  const jobs = (n: number) => Array.from({ length: n }, (_, i) => ({ name: 'n', data: { i } }))
  await queue.addBulk(jobs(3))
  if (mode === 'analysed') await admin.query(`vacuum analyze "${schema}".jobs`)
  await worker.run()
  for (let i = 0; i < 12; i++) { await queue.addBulk(jobs(2)); await sleep(40) }
  while (done < 27) await sleep(10)
  const before = await seqScans()
  const started = performance.now()
  for (let i = 0; i < N / 1000; i++) await queue.addBulk(jobs(1000))
  while (done < 27 + N) await sleep(10)
  const ms = performance.now() - started
  await sleep(1200) // other sessions report their statistics at most once a second
  console.log(`${mode}: ${Math.round(N / ms * 1000)} jobs/s (adds and drain), ${(await seqScans()) - before} sequential scans of jobs`)
} finally {
  await worker.close()
  await queue.close()
  await admin.query(`drop schema "${schema}" cascade`)
  await admin.end()
}
