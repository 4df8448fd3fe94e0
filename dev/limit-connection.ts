// A lab probe, not a benchmark: what a session's history does to W3's limit. Two connections send the bare 1,000-row
// INSERT of W3's limit (bench/limits.ts) in turn, one of them after reading the table's columns from
// information_schema (what bench/paired.ts did on the limit's connection until 2026-12-05), with pgonce's addBulk
// between the rounds (OURS=0 leaves it out); rows/s of each per round. bench/README.md, "W3's limit and the connection it
// ran on", has what it found.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/probe_limit_connection ROUNDS=6 npx tsx dev/limit-connection.ts
//
// The database named in DATABASE_URL is dropped and created again: give it one of its own.

import pg from 'pg'
import { Queue, migrate } from '../src/index.js'
import { connect } from './postgres-server.js'
import { recreateDatabase } from './probe-database.js'

const url = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/probe_limit_connection')
const ROUNDS = Number(process.env.ROUNDS ?? 6)
const BATCHES = 5
await recreateDatabase(url)
await migrate({ connectionString: url.href, schema: 'pgonce' })

const queried = await connect(url.href)
const clean = await connect(url.href)
// QUERY=short: the same query without its is_identity / is_generated / column_name conditions.
await queried.query(process.env.QUERY === 'short'
  ? `select column_name, data_type from information_schema.columns
     where table_schema = $1 and table_name = 'jobs' and is_nullable = 'NO' and column_default is null order by ordinal_position`
  : `select column_name, data_type from information_schema.columns
     where table_schema = $1 and table_name = 'jobs' and is_nullable = 'NO' and column_default is null
       and is_identity = 'NO' and is_generated = 'NEVER' and column_name not in ('queue', 'name', 'data')
     order by ordinal_position`, ['pgonce'])

const insertMany = `insert into pgonce.jobs (queue, name, data) select $1, u.name, u.data from unnest($2::text[], $3::jsonb[]) as u(name, data)`
const names = Array.from({ length: 1000 }, () => 'job')
const datas = (round: number) => Array.from({ length: 1000 }, (_, k) => JSON.stringify({ i: round * 1000 + k }))
async function limitRound(client: pg.Client, round: number): Promise<number> {
  const started = performance.now()
  for (let b = 0; b < BATCHES; b++) await client.query({ name: 'insert-many', text: insertMany, values: ['w3', names, datas(round)] })
  return Math.round((BATCHES * 1000 * 1000) / (performance.now() - started))
}

const pool = new pg.Pool({ connectionString: url.href, max: 4 })
pool.on('error', () => {})
const queue = new Queue('w3', { pool, schema: 'pgonce', migrate: false })
const ours = async (round: number) => {
  for (let b = 0; b < BATCHES; b++) await queue.addBulk(Array.from({ length: 1000 }, (_, k) => ({ name: 'job', data: { i: round * 1000 + k } })))
}

for (let round = 0; round < ROUNDS; round++) {
  if (process.env.OURS !== '0') await ours(round)
  const first = round % 2 === 0 ? queried : clean
  const a = await limitRound(first, round)
  const b = await limitRound(first === queried ? clean : queried, round)
  const [q, c] = first === queried ? [a, b] : [b, a]
  process.stdout.write(`round ${round}: after the catalog query ${q} rows/s, clean ${c} rows/s\n`)
}
await queue.close()
await pool.end()
await queried.end()
await clean.end()
