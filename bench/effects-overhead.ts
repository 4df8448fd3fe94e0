// Micro-benchmark: latency of Effects.runOnce per call and of Effects.record inside a transaction (p50/p99, markdown table).

import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import pg from 'pg'
import { Effects, migrate } from '../src/index.js'

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const n = Number(process.env.BENCH_N ?? 2000)
if (!Number.isInteger(n) || n < 1) throw new Error('BENCH_N must be a positive whole number')
const schema = `bench_effects_${randomBytes(4).toString('hex')}`

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
}

/** Times `n` sequential calls of `fn(i)` after a short warm-up; returns p50 and p99 in ms. */
async function measure(fn: (i: number) => Promise<unknown>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < Math.min(50, n); i++) await fn(-1 - i)
  const times: number[] = []
  for (let i = 0; i < n; i++) {
    const start = performance.now()
    await fn(i)
    times.push(performance.now() - start)
  }
  times.sort((a, b) => a - b)
  return { p50: quantile(times, 0.5), p99: quantile(times, 0.99) }
}

const pool = new pg.Pool({ connectionString: url, max: 2 })
await migrate({ pool, schema })
const effects = new Effects({ pool, schema, migrate: false })
const client = await pool.connect()
const rows: [string, { p50: number; p99: number }][] = []
try {
  rows.push(['baseline: `select 1` round trip', await measure(() => client.query('select 1'))])
  rows.push(['runOnce, first time (claim + complete)', await measure((i) => effects.runOnce(`ran:${i}`, () => {}))])
  rows.push(['runOnce, duplicate-done (claim + read)', await measure(() => effects.runOnce('ran:0', () => {}))])
  rows.push(['runOnce, first time, doneTtl 24 h', await measure((i) => effects.runOnce(`ttl:${i}`, () => {}, { doneTtl: 86_400_000 }))])
  const inTx = async (body: () => Promise<unknown>) => {
    await client.query('begin')
    await body()
    await client.query('commit')
  }
  rows.push(['transaction without record (begin + commit)', await measure(() => inTx(async () => {}))])
  rows.push(['transaction with record, first time', await measure((i) => inTx(() => effects.record(client, `rec:${i}`)))])
  rows.push(['transaction with record, already recorded', await measure(() => inTx(() => effects.record(client, 'rec:0')))])
  let recordOnly: number[] = []
  await client.query('begin')
  for (let i = 0; i < n; i++) {
    const t = performance.now()
    await effects.record(client, `inside:${i}`)
    recordOnly.push(performance.now() - t)
  }
  await client.query('commit')
  recordOnly = recordOnly.sort((a, b) => a - b)
  rows.push(['record call alone, inside an open transaction', { p50: quantile(recordOnly, 0.5), p99: quantile(recordOnly, 0.99) }])
} finally {
  client.release()
  await effects.close()
  await pool.query(`drop schema if exists "${schema}" cascade`)
  await pool.end()
}

const fmt = (ms: number) => ms.toFixed(3)
console.log(`\nEffects overhead, N=${n} sequential calls each, one connection, PostgreSQL at ${new URL(url).host}\n`)
console.log('| operation | p50 ms | p99 ms |')
console.log('| --- | ---: | ---: |')
for (const [name, { p50, p99 }] of rows) console.log(`| ${name} | ${fmt(p50)} | ${fmt(p99)} |`)
