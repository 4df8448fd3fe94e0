// A lab probe, not a benchmark: where a plain queue.add's time goes over the bare one-row INSERT (W1's limit).
// Variants of the add's statement (sent with pool.query) and queue.add, all on one pooled connection, are interleaved
// call by call (each called in turn, N times; the order rotates), so that the VM's drift moves them all alike, and the
// median latency of each is printed. bench/README.md, "W1's ceiling, call by call", has what it found. Interleaved,
// queue.add read ~40–60 µs above its statement, which it does not cost when run alone (the same note): compare the
// statement variants with each other, and queue.add on its own.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/probe_plain_add N=5000 npx tsx dev/plain-add-calls.ts
//
// The database named in DATABASE_URL is dropped and created again: give it one of its own.

import pg from 'pg'
import { prepared } from '../src/db/prepared.js'
import { Queue, migrate } from '../src/index.js'
import { recreateDatabase } from './probe-database.js'

const url = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/probe_plain_add')
const N = Number(process.env.N ?? 5000)
await recreateDatabase(url)
await migrate({ connectionString: url.href, schema: 'pgonce' })

// One connection for every variant: a variant on another backend than the one before it measured ~+80 µs (the server
// process waking cold), which would be the probe's artefact, not a cost of that variant.
const pool = new pg.Pool({ connectionString: url.href, max: 1 })
pool.on('error', () => {})
const queue = new Queue('q', { pool, schema: 'pgonce', migrate: false })

const statement = prepared('add-plain-job', 'pgonce')
const probeOff = statement.text.replace(/select "?pgonce"?\._idle_worker_waits\(\$1\) as waits/, 'select false and $1::text is not null as waits')
if (probeOff === statement.text) throw new Error('sql/add-plain-job.sql no longer probes the idle slots as this probe expects')
const answer = `concat_ws(',', id, state, priority, max_attempts, (extract(epoch from run_at) * 1000)::float8, (extract(epoch from created_at) * 1000)::float8)`
const ruleInsert = `insert into pgonce.jobs as j (id, queue, name, data, state, run_at, priority, max_attempts, backoff, trace_context)
  values (nextval('pgonce.job_ids'), $1, $2, coalesce($3::jsonb, '{}'::jsonb), pgonce._new_job_state(false, $4::bigint),
    pgonce._due_at($4::bigint), coalesce($5::integer, pgonce._default_priority()),
    coalesce($6::integer, pgonce._default_max_attempts()), $7::jsonb, $8)`

const data = (i: number) => JSON.stringify({ i })
const three = (q: string) => (i: number) => [q, 'job', data(i)]
const eight = (q: string) => (i: number) => [q, 'job', data(i), null, null, null, null, null]
const nine = (q: string) => (i: number) => [q, 'job', data(i), null, null, null, null, null, true]
const onClient = (name: string, text: string, values: (i: number) => unknown[]) => (i: number) => pool.query({ name, text, values: values(i) })

const variants: [string, (i: number) => Promise<unknown>][] = [
  ['bare INSERT (the limit)', onClient('bare', 'insert into pgonce.jobs (queue, name, data) values ($1, $2, $3)', three('a'))],
  ['bare INSERT returning the answer', onClient('ret', `insert into pgonce.jobs (queue, name, data) values ($1, $2, $3) returning 'added' as outcome, null::text as error, ${answer} as job`, three('b'))],
  ['rule INSERT, same answer', onClient('rules', `${ruleInsert} returning 'added' as outcome, null::text as error, ${answer} as job`, eight('c'))],
  ['rule INSERT, answer by _answer()', onClient('rules-answer', `with ins as (${ruleInsert} returning j)
    select x.outcome, x.error, x.job from ins, lateral pgonce._answer(cast(row(1, 'added', null, ins.j) as pgonce.admission)) x`, eight('d'))],
  ['add-plain-job.sql, probe answering false', onClient('probe-off', probeOff, nine('e'))],
  ['add-plain-job.sql', onClient(statement.name, statement.text, nine('f'))],
  ['queue.add', (i) => queue.add('job', { i })],
]

for (let i = 0; i < 100; i++) for (const [, run] of variants) await run(i)
const latencies = variants.map((): number[] => [])
for (let i = 0; i < N; i++) {
  for (let k = 0; k < variants.length; k++) {
    const v = (k + i) % variants.length
    const started = performance.now()
    await (variants[v] as [string, (i: number) => Promise<unknown>])[1](i)
    ;(latencies[v] as number[]).push((performance.now() - started) * 1000)
  }
}
const quantile = (a: number[], q: number) => [...a].sort((x, y) => x - y)[Math.floor(a.length * q)] as number
variants.forEach(([label], v) => {
  const a = latencies[v] as number[]
  console.log(`${label.padEnd(42)} p25 ${quantile(a, 0.25).toFixed(0).padStart(5)} µs   p50 ${quantile(a, 0.5).toFixed(0).padStart(5)} µs`)
})
await queue.close()
await pool.end()
