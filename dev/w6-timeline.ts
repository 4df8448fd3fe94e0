// A lab probe, not a benchmark: where W6's latency goes. After the same idle pause as W6, samples alternate between a
// handed-off `queue.add` (a Worker of this process sleeps on the queue) and the bare INSERT + pg_notify of W6's limit,
// and the median of each step is printed, in ms from the call: the statement handed to pg (`client.query` entered),
// the add's answer back, the NOTIFY seen by a second LISTEN connection of the probe, and (queue.add) the handler
// started. bench/README.md, "W6's timeline", has what it found. The server's time per statement is best read from the
// server's log with `log_min_duration_statement = 0` set on the probe's database (`ALTER DATABASE … SET …`).
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/probe_w6 N=600 npx tsx dev/w6-timeline.ts
//
// The database named in DATABASE_URL is dropped and created again: give it one of its own.

import pg from 'pg'
import { Queue, Worker, migrate } from '../src/index.js'
import { connect } from './postgres-server.js'
import { recreateDatabase } from './probe-database.js'

const url = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/probe_w6')
const N = Number(process.env.N ?? 600)
const PAUSE_MS = 10
const channel = 'pgonce:pgonce'
await recreateDatabase(url)
await migrate({ connectionString: url.href, schema: 'pgonce' })

// The moment any pg client of this process is first handed a statement after the sample began.
let sentAt = 0
const query = pg.Client.prototype.query
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  if (sentAt === 0) sentAt = performance.now()
  return (query as (...a: unknown[]) => unknown).apply(this, args)
} as typeof query

const listener = await connect(url.href)
await listener.query(`listen "${channel}"`)
let notifiedAt = 0
listener.on('notification', () => {
  notifiedAt ||= performance.now()
})

const pool = new pg.Pool({ connectionString: url.href, max: 16 })
pool.on('error', () => {})
const queue = new Queue<{ i: number }>('w6', { pool, schema: 'pgonce', migrate: false })
let started: ((at: number) => void) | null = null
const worker = new Worker<{ i: number }>('w6', async () => {
  started?.(performance.now())
  started = null
}, { connectionString: url.href, schema: 'pgonce', concurrency: 16, migrate: false })
worker.on('error', () => {})
const bare = await connect(url.href)
const insertNotify = `with j as (insert into pgonce.jobs (queue, name, data) values ('limit', 'job', $1) returning id)
  select pg_notify($2, j.id::text) from j`

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
type Sample = { sent: number; returned: number; notified: number; handler: number }
const samples: { add: Sample[]; bare: Sample[] } = { add: [], bare: [] }

/** How long a sample may wait for its handler or its NOTIFY before the probe gives up. */
const GIVE_UP_MS = 30_000

/** When the Worker's handler starts (the add's job), or a rejection after GIVE_UP_MS. */
function handlerStart(i: number): Promise<number> {
  let timer: NodeJS.Timeout | undefined
  return new Promise<number>((resolve, reject) => {
    started = resolve
    timer = setTimeout(() => reject(new Error(`sample ${i}: no handler start within ${GIVE_UP_MS / 1000} s`)), GIVE_UP_MS)
  }).finally(() => clearTimeout(timer))
}

async function sample(kind: 'add' | 'bare', i: number): Promise<Sample> {
  sentAt = 0
  notifiedAt = 0
  const t0 = performance.now()
  let returned = 0
  if (kind === 'add') {
    const handler = handlerStart(i)
    const [, at] = await Promise.all([queue.add('job', { i }).then(() => (returned = performance.now())), handler])
    return { sent: sentAt - t0, returned: returned - t0, notified: notifiedAt - t0, handler: at - t0 }
  }
  await bare.query({ name: 'insert-notify', text: insertNotify, values: [JSON.stringify({ i }), channel] })
  returned = performance.now()
  for (const given = performance.now(); notifiedAt === 0; await pause(0)) {
    if (performance.now() - given > GIVE_UP_MS) throw new Error(`sample ${i}: no NOTIFY within ${GIVE_UP_MS / 1000} s`)
  }
  return { sent: sentAt - t0, returned: returned - t0, notified: notifiedAt - t0, handler: NaN }
}

await pause(500)
for (let i = 0; i < N; i++) {
  await pause(PAUSE_MS)
  const kind = i % 2 === 0 ? 'add' : 'bare'
  const s = await sample(kind, i)
  if (i >= 100) samples[kind].push(s)
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
for (const kind of ['add', 'bare'] as const) {
  const of = (k: keyof Sample) => median(samples[kind].map((s) => s[k])).toFixed(3)
  process.stdout.write(`${kind === 'add' ? 'queue.add     ' : 'INSERT+NOTIFY '} sent ${of('sent')}  returned ${of('returned')}  ` +
    `notified ${of('notified')}  handler ${kind === 'add' ? of('handler') : '-'} ms\n`)
}
await worker.close()
await queue.close()
await pool.end()
await listener.end()
await bare.end()
