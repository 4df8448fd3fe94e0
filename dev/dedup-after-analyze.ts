// A lab probe, not a benchmark: W5's shape (10,000 keyed adds over 1,000 keys, 16 producers, after 320 untimed keyed
// adds over 80 keys on another queue, as bench/workloads/dedup.ts warms up) on a fresh schema, with the statistics in
// one of these states before the timed adds:
//
//   as-is       never vacuumed or analysed (the planner assumes at least 10 pages a table)
//   analysed    VACUUM ANALYZE + CHECKPOINT, as the bench's second mode (the tables' statistics say 80 keys, 1 page)
//   vacuum | analyze | checkpoint   one of the three alone
//
//   DATABASE_URL=… npx tsx dev/dedup-after-analyze.ts analysed
//   DATABASE_URL='…?options=-c%20enable_seqscan%3Doff'   the same with sequential scans priced out (a diagnosis only)
//   PGSS=1  prints the top statements of pg_stat_statements (a server with the extension loaded)
//
// bench/README.md, "W5 after VACUUM ANALYZE: plans made on a near-empty table".

import pg from 'pg'
import { Queue, migrate } from '../src/index.js'

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const mode = process.argv[2] ?? 'as-is'
const maintenance: Record<string, string[]> = {
  'as-is': [], analysed: ['vacuum analyze', 'checkpoint'], vacuum: ['vacuum'], analyze: ['analyze'], checkpoint: ['checkpoint'],
}
const statements = maintenance[mode]
if (statements === undefined) throw new Error(`mode: one of ${Object.keys(maintenance).join(', ')}`)

const schema = `probe_w5_${Math.random().toString(16).slice(2, 8)}`
const ttl = 3_600_000
await migrate({ connectionString: url, schema })
const admin = new pg.Pool({ connectionString: url, max: 1 })
const pool = new pg.Pool({ connectionString: url, max: 16 })
try {
  const producers = async (n: number, add: (i: number) => Promise<unknown>): Promise<void> => {
    let next = 0
    await Promise.all(Array.from({ length: 16 }, async () => { while (next < n) await add(next++) }))
  }
  const warm = new Queue('w5-warmup', { pool, schema })
  await producers(320, (i) => warm.add('n', { i }, { deduplication: { id: `warm-${i % 80}`, ttl } }))
  for (const statement of statements) await admin.query(statement)
  if (process.env.PGSS) await admin.query('select pg_stat_statements_reset()')
  const queue = new Queue('w5', { pool, schema })
  const started = performance.now()
  await producers(10_000, (i) => queue.add('n', { i }, { deduplication: { id: `key-${i % 1000}`, ttl } }))
  console.log(`${mode}: ${Math.round(10_000_000 / (performance.now() - started))} adds/s`)
  if (process.env.PGSS) {
    const { rows } = await admin.query<{ calls: string; us: string; q: string }>(
      `select calls, round((mean_exec_time * 1000)::numeric, 1) as us, left(regexp_replace(query, '\\s+', ' ', 'g'), 100) as q
       from pg_stat_statements where calls >= 100 order by total_exec_time desc limit 10`)
    for (const r of rows) console.log(`${r.calls.padStart(6)} calls ${r.us.padStart(7)} µs  ${r.q}`)
  }
} finally {
  await admin.query(`drop schema "${schema}" cascade`)
  await pool.end()
  await admin.end()
}
