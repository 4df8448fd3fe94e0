// Micro-benchmark: latency of dedup adds (first add, duplicate, extend, replace) on one Queue, p50/p99 in ms, as a markdown table.
// Run: npx tsx bench/dedup-latency.ts   (env BENCH_N: calls per row, default 2000; BENCH_PROFILE=1: nested plans of one add)

import { randomBytes } from 'node:crypto'
import { cpus, loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import pg from 'pg'
import { Queue, migrate } from '../src/index.js'
import { percentile, runProducers } from './measure.js'

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const n = Number(process.env.BENCH_N ?? 2000)
if (!Number.isInteger(n) || n < 1) throw new Error('BENCH_N must be a positive whole number')
const profile = process.env.BENCH_PROFILE === '1'
const schema = `bench_dedup_${randomBytes(4).toString('hex')}`
const TTL = 86_400_000

interface Row { name: string; p50: number; p99: number; note?: string }

/** Times `n` sequential awaited calls of `fn(i)` after a short warm-up. */
async function measure(name: string, fn: (i: number) => Promise<unknown>, note?: string): Promise<Row> {
  for (let i = 0; i < Math.min(50, n); i++) await fn(-1 - i)
  const times: number[] = []
  await runProducers(n, 1, async (i) => {
    const start = performance.now()
    await fn(i)
    times.push(performance.now() - start)
  })
  return { name, p50: percentile(times, 50), p99: percentile(times, 99), ...(note === undefined ? {} : { note }) }
}

/** Server-side execution time of add_job() (EXPLAIN ANALYZE), p50/p99 over min(n, 500) calls. */
async function serverTime(client: pg.PoolClient, name: string, args: (i: number) => unknown[], call: string): Promise<Row> {
  const ms: number[] = []
  for (let i = 0; i < Math.min(n, 500); i++) {
    const { rows } = await client.query<{ 'QUERY PLAN': { 'Execution Time': number }[] }>(
      `explain (analyze, format json) select * from "${schema}".add_job(${call})`, args(i))
    ms.push(rows[0]?.['QUERY PLAN'][0]?.['Execution Time'] ?? Number.NaN)
  }
  return { name, p50: percentile(ms, 50), p99: percentile(ms, 99), note: 'inside Postgres, no round trip' }
}

/** Prints the plan of every statement run inside add_job() for one call (auto_explain, nested statements). */
async function printNestedPlans(client: pg.PoolClient, title: string, args: unknown[], call: string): Promise<void> {
  const notices: string[] = []
  const onNotice = (msg: { message?: string }) => { notices.push(msg.message ?? '') }
  client.on('notice', onNotice)
  try {
    await client.query(`select * from "${schema}".add_job(${call})`, args)
  } finally {
    client.off('notice', onNotice)
  }
  console.log(`\n#### ${title}\n\n\`\`\`\n${notices.join('\n\n')}\n\`\`\``)
}

const pool = new pg.Pool({ connectionString: url, max: 2 })
await migrate({ pool, schema })
const queue = new Queue<{ i: number }>('bench', { pool, schema, migrate: false })
const client = await pool.connect()
const rows: Row[] = []
try {
  rows.push(await measure('baseline: `select 1` round trip', () => client.query('select 1')))
  rows.push(await measure('add, no key (plain insert)', (i) => queue.add('push', { i })))
  rows.push(await measure('first add, new key (TTL 24 h)', (i) => queue.add('push', { i }, { deduplication: { id: `new:${i}`, ttl: TTL } })))
  rows.push(await measure('first add, new key (no TTL)', (i) => queue.add('push', { i }, { deduplication: { id: `new-no-ttl:${i}` } })))

  await queue.add('push', { i: 0 }, { deduplication: { id: 'held', ttl: TTL } })
  rows.push(await measure('duplicate add, key held (TTL)', (i) => queue.add('push', { i }, { deduplication: { id: 'held', ttl: TTL } })))
  await queue.add('push', { i: 0 }, { deduplication: { id: 'held-no-ttl' } })
  rows.push(await measure('duplicate add, key held (no TTL, owner live)', (i) => queue.add('push', { i }, { deduplication: { id: 'held-no-ttl' } })))
  await queue.add('push', { i: 0 }, { jobId: 'live-id' })
  rows.push(await measure('duplicate add, jobId live', (i) => queue.add('push', { i }, { jobId: 'live-id' })))
  rows.push(await measure('extend, key held by a pending owner', (i) =>
    queue.add('push', { i }, { deduplication: { id: 'held', ttl: TTL, extend: true } })))
  rows.push(await measure('replace, key held by a pending owner', (i) =>
    queue.add('push', { i }, { deduplication: { id: 'replaced', ttl: TTL, replace: true } }), 'deletes the old row, inserts the new one'))

  const dupCall = `queue => 'bench', name => 'push', data => $1::jsonb, dedup_id => $2, dedup_ttl_ms => ${TTL}`
  rows.push(await serverTime(client, 'server time: duplicate add_job()', (i) => [JSON.stringify({ i }), 'held'], dupCall))
  rows.push(await serverTime(client, 'server time: first add_job(), new key', (i) => [JSON.stringify({ i }), `server-new:${i}`], dupCall))

  if (profile) {
    await client.query(`load 'auto_explain'`)
    await client.query(`set auto_explain.log_min_duration = 0`)
    await client.query(`set auto_explain.log_nested_statements = on`)
    await client.query(`set auto_explain.log_analyze = on`)
    await client.query(`set client_min_messages = log`)
    await printNestedPlans(client, 'Nested plans: duplicate add (key held)', [JSON.stringify({ i: 1 }), 'held'], dupCall)
    await printNestedPlans(client, 'Nested plans: first add (new key)', [JSON.stringify({ i: 1 }), 'profile-new'], dupCall)
    await client.query(`reset client_min_messages`)
  }
} finally {
  client.release()
  await queue.close()
  await pool.query(`drop schema if exists "${schema}" cascade`)
  await pool.end()
}

const load = loadavg().map((l) => l.toFixed(2)).join(' ')
console.log(`\nDedup add latency: N=${n} sequential awaited calls per row on one Queue; ` +
  `PostgreSQL at ${new URL(url).host}; ${cpus().length} CPUs, load average ${load}\n`)
console.log(['| operation | p50 ms | p99 ms | note |', '| --- | ---: | ---: | --- |',
  ...rows.map((r) => `| ${r.name} | ${r.p50.toFixed(3)} | ${r.p99.toFixed(3)} | ${r.note ?? ''} |`)].join('\n'))
