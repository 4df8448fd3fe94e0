// A lab probe, not a benchmark: keyed adds (deduplication with a TTL, as W5 makes them) through queue.add from P
// producers on one pool, in rounds of first adds (new keys) and duplicates (held keys), printing adds/s and, where the
// server has pg_stat_statements (tracking nested statements too), the server's mean time per add of the round, the
// Node process's CPU time and the WAL written per add.
// Any package root (another commit's checkout) can be loaded, so the same probe compares two versions in one session;
// bench/README.md, "A single add's INSERT and answer", has what it found.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5434/probe_keyed P=1 npx tsx dev/keyed-add-probe.ts [package root]
//
// The database named in DATABASE_URL is dropped and created again: give it one of its own.

import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import type * as PgonceApi from '../src/index.js'
import { recreateDatabase } from './probe-database.js'

const url = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/probe_keyed')
const producers = Number(process.env.P ?? 16)
const root = resolve(process.argv[2] ?? '.')
const { Queue, migrate } = (await import(pathToFileURL(`${root}/src/index.ts`).href)) as typeof PgonceApi

await recreateDatabase(url)

const pool = new pg.Pool({ connectionString: url.href, max: producers })
pool.on('error', () => {})
await migrate({ pool, schema: 'pgonce' })
// LAB_SQL: a file of SQL run after the migration (a variant to compare: an index dropped, a function redefined).
if (process.env.LAB_SQL) await pool.query(readFileSync(process.env.LAB_SQL, 'utf8'))
const statements = (await pool.query(`select 1 from pg_extension where extname = 'pg_stat_statements'`)).rowCount === 1
const queue = new Queue('keyed', { pool, schema: 'pgonce', migrate: false })

async function round(label: string, n: number, key: (i: number) => string): Promise<void> {
  if (statements) await pool.query('select pg_stat_statements_reset()')
  let next = 0
  const lsn = (await pool.query<{ l: string }>('select pg_current_wal_lsn()::text as l')).rows[0]?.l
  const cpu = process.cpuUsage()
  const started = performance.now()
  await Promise.all(Array.from({ length: producers }, async () => {
    for (let i = next++; i < n; i = next++) await queue.add('j', { i }, { deduplication: { id: key(i), ttl: 3_600_000 } })
  }))
  const ms = performance.now() - started
  const used = process.cpuUsage(cpu)
  const clientUs = (used.user + used.system) / n
  const wal = (await pool.query<{ b: string }>('select pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn) as b', [lsn])).rows[0]?.b
  let server = ''
  if (statements) {
    const { rows } = await pool.query<{ us: string }>(
      `select round((total_exec_time / calls * 1000)::numeric, 1) as us from pg_stat_statements
       where toplevel and calls >= $1 and dbid = (select oid from pg_database where datname = current_database())`, [n])
    server = `, server ${rows.map((r) => r.us).join('/')} µs an add`
  }
  console.log(`${label}: ${Math.round((n / ms) * 1000)} adds/s (${((ms * 1000) / n).toFixed(0)} µs wall an add, Node ${clientUs.toFixed(1)} µs CPU, ${Math.round(Number(wal) / n)} WAL bytes an add${server})`)
}

try {
  await round('warm-up', 640, (i) => `w-${i % 80}`)
  for (let r = 0; r < 3; r++) {
    await round(`first adds, round ${r}`, 3000, (i) => `k${r}-${i}`)
    await round(`duplicates, round ${r}`, 6000, (i) => `k${r}-${i % 3000}`)
  }
} finally {
  await queue.close()
  await pool.end()
}
