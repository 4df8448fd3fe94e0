// `npm run bench:history`: what a long history of completed jobs, its pruning and a table full of dead rows cost
// pgonce, alone, in databases of its own on the server at DATABASE_URL:
//   1. history against empty: sequential adds, adds from 16 producers and a drain (Worker, concurrency 16) in a
//      database holding 5,000,000 completed jobs and in an empty one, the two alternated over rounds;
//   2. pruning: that history past its retention; a drain alone, beside back-to-back runMaintenance calls, and beside
//      a second Worker whose own (paced) housekeeping prunes, alternated; then one runMaintenance call alone;
//   3. a long drain with no vacuum: 1,000,000 jobs of one INSERT (one run_at), jobs/s per slice, first against last.
// Sizes scale with BENCH_SCALE. Markdown on stdout, every figure in bench/results/history-<date>-<host>[-scale<x>].json.

import pg from 'pg'
import { Queue, Worker, migrate, runMaintenance } from '../src/index.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { describeMachine } from './machine.js'
import { percentile, perSecond, runProducers, within } from './measure.js'
import { resultStem, writeResultFile } from './results.js'
import { maintain, payloads } from './workloads/context.js'

const SCALE = Number(process.env.BENCH_SCALE ?? 1)
if (!(SCALE > 0)) throw new Error('BENCH_SCALE must be above 0')
const size = (n: number) => Math.max(1000, Math.round(n * SCALE))
const SIZES = {
  history: size(5_000_000),
  rounds: 3,
  sequential: size(3000),
  concurrent: size(10_000),
  drain: size(50_000),
  longDrain: size(1_000_000),
  slice: size(25_000),
}
const SCHEMA = 'pgonce'
const QUEUES = Array.from({ length: 10 }, (_, i) => (i === 0 ? 'adds' : i === 1 ? 'drain' : `other-${i}`))
const RETENTION_MS = 30 * 60 * 1000
const serverUrl = process.env.DATABASE_URL?.trim() || 'postgres://postgres@127.0.0.1:5432/test'
const log = (message: string) => process.stderr.write(`[bench:history] ${message}\n`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
const median = (xs: number[]) => percentile(xs, 50)
const range = (xs: number[]) => `${fmt(median(xs))} (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))})`

interface Db {
  name: string
  url: string
  admin: pg.Pool
  queue(name: string): Queue
  close(): Promise<void>
}

async function openDb(name: string): Promise<Db> {
  const url = await freshDatabase(serverUrl, name)
  const pool = new pg.Pool({ connectionString: url, max: 16 })
  const admin = new pg.Pool({ connectionString: url, max: 2 })
  pool.on('error', () => {})
  admin.on('error', () => {})
  await migrate({ pool, schema: SCHEMA })
  const queues = new Map<string, Queue>()
  return {
    name,
    url,
    admin,
    queue: (q) =>
      queues.get(q) ?? (queues.set(q, new Queue(q, { pool, schema: SCHEMA, migrate: false })).get(q) as Queue),
    close: async () => {
      for (const q of queues.values()) await q.close()
      await pool.end()
      await admin.end()
      await dropDatabase(serverUrl, name)
    },
  }
}

/** `rows` completed jobs over QUEUES, finished 1 to 4 hours ago, straight into the table. */
async function loadHistory(db: Db, rows: number): Promise<void> {
  await db.admin.query(
    `insert into ${SCHEMA}.jobs (queue, name, data, state, attempts, run_at, created_at, started_at, finished_at)
     select ($1::text[])[1 + g % cardinality($1::text[])], 'done', jsonb_build_object('i', g), 'completed', 1,
            t - interval '2 seconds', t - interval '2 seconds', t - interval '1 second', t
     from generate_series(1, $2::bigint) g, lateral (select now() - interval '1 hour' - interval '3 hours' * ((g)::float8 / $2) as t) f`,
    [QUEUES, rows],
  )
}

/**
 * Drains the `n` jobs queued in `queue` with a Worker (concurrency 16, no-op handler), from the first handler start to
 * the `n`th completion stored; `slice` is called every `every` completions with the ms so far.
 */
async function drain(
  db: Db,
  queue: string,
  n: number,
  options: { maintenanceIntervalMs?: number; every?: number; slice?: (ms: number) => void } = {},
): Promise<number> {
  let first = 0
  let completed = 0
  let done: (ms: number) => void = () => {}
  const finished = new Promise<number>((resolve) => {
    done = resolve
  })
  const worker = new Worker(
    queue,
    async () => {
      if (first === 0) first = performance.now()
    },
    {
      connectionString: db.url,
      schema: SCHEMA,
      concurrency: 16,
      migrate: false,
      ...(options.maintenanceIntervalMs === undefined ? {} : { maintenanceIntervalMs: options.maintenanceIntervalMs }),
    },
  )
  worker.on('error', (err) => log(`${db.name}: ${err.message}`))
  worker.on('completed', () => {
    completed++
    if (options.every && completed % options.every === 0) options.slice?.(performance.now() - first)
    if (completed === n) done(performance.now() - first)
  })
  try {
    return perSecond(n, await within(finished, 600_000, `${n} completions in ${db.name}`))
  } finally {
    await worker.close()
  }
}

async function enqueue(db: Db, queue: string, n: number): Promise<void> {
  for (let from = 0; from < n; from += 1000) {
    await db.queue(queue).addBulk(payloads(from, Math.min(1000, n - from)).map((data) => ({ name: 'job', data })))
  }
}

/** A part's table, and its figures for the JSON. */
interface Part {
  lines: string[]
  data: unknown
}

const SECTIONS = ['sequential adds', 'adds from 16 producers', 'drain'] as const

/** The three sections of part 1 on `db`, each after VACUUM ANALYZE and a CHECKPOINT; per second each. */
async function sections(db: Db): Promise<number[]> {
  await maintain(db.admin, 'analysed')
  const q = db.queue('adds')
  const sequential = perSecond(
    SIZES.sequential,
    await runProducers(SIZES.sequential, 1, (i) => q.add('add', { i }).then(() => {})),
  )
  const concurrent = perSecond(
    SIZES.concurrent,
    await runProducers(SIZES.concurrent, 16, (i) => q.add('add', { i }).then(() => {})),
  )
  await enqueue(db, 'drain', SIZES.drain)
  await maintain(db.admin, 'analysed')
  return [sequential, concurrent, await drain(db, 'drain', SIZES.drain)]
}

async function historyAgainstEmpty(empty: Db, history: Db): Promise<Part> {
  const runs = { empty: [] as number[][], history: [] as number[][] }
  for (let r = 0; r < SIZES.rounds; r++) {
    for (const which of r % 2 === 0 ? (['empty', 'history'] as const) : (['history', 'empty'] as const)) {
      runs[which].push(await sections(which === 'empty' ? empty : history))
      log(
        `part 1 round ${r + 1}, ${which}: ${runs[which]
          .at(-1)
          ?.map((x) => fmt(x))
          .join(', ')}`,
      )
    }
  }
  const col = (which: 'empty' | 'history', k: number) => runs[which].map((x) => x[k] as number)
  return {
    data: runs,
    lines: [
      `### History against empty (median of ${SIZES.rounds} rounds, range)`,
      '',
      `| per second | empty | ${fmt(SIZES.history)} completed jobs | history ÷ empty |`,
      '| --- | --- | --- | --- |',
      ...SECTIONS.map(
        (s, k) =>
          `| ${s} | ${range(col('empty', k))} | ${range(col('history', k))} | ${fmt(median(col('history', k)) / median(col('empty', k)), 2)}× |`,
      ),
    ],
  }
}

type Pruner = 'none' | 'back-to-back runMaintenance' | "a Worker's housekeeping (paced)"

/** Starts a pruner on `db`; its stop() resolves once it has stopped, with the ms that took. */
function startPruner(db: Db, pruner: Pruner): () => Promise<number> {
  const timedStop = (stop: () => Promise<void>) => async () => {
    const started = performance.now()
    await stop()
    return performance.now() - started
  }
  if (pruner === 'none') return async () => 0
  if (pruner !== 'back-to-back runMaintenance') {
    const keeper = new Worker('keeper', async () => {}, { connectionString: db.url, schema: SCHEMA, migrate: false })
    keeper.on('error', (err) => log(`keeper: ${err.message}`))
    return timedStop(() => keeper.close())
  }
  const pool = new pg.Pool({ connectionString: db.url, max: 1 })
  pool.on('error', () => {})
  let stopping = false
  const loop = (async () => {
    while (!stopping) await runMaintenance({ pool, schema: SCHEMA })
  })()
  return timedStop(async () => {
    stopping = true
    await loop
    await pool.end()
  })
}

async function pruning(db: Db): Promise<Part> {
  const historyLeft = async () =>
    Number(
      (await db.admin.query<{ n: string }>(`select count(*) as n from ${SCHEMA}.jobs where queue <> 'drain'`)).rows[0]
        ?.n,
    )
  for (const q of QUEUES) await db.queue(q).setRetention({ completedMs: RETENTION_MS })
  await maintain(db.admin, 'analysed')
  const pruners: Pruner[] = ['none', 'back-to-back runMaintenance', "a Worker's housekeeping (paced)"]
  const rows = new Map(
    pruners.map((p) => [p, { drain: [] as number[], pruned: [] as number[], stopMs: [] as number[] }]),
  )
  for (let r = 0; r < SIZES.rounds; r++) {
    for (const pruner of r % 2 === 0 ? pruners : [...pruners].reverse()) {
      await enqueue(db, 'drain', SIZES.drain)
      const stop = startPruner(db, pruner)
      await sleep(500)
      const left = await historyLeft()
      const started = performance.now()
      const rate = await drain(db, 'drain', SIZES.drain, { maintenanceIntervalMs: 0 })
      const pruned = perSecond(left - (await historyLeft()), performance.now() - started)
      const stopMs = await stop()
      const row = rows.get(pruner)
      row?.drain.push(rate)
      row?.pruned.push(pruned)
      row?.stopMs.push(stopMs)
      log(
        `part 2 round ${r + 1}, ${pruner}: drain ${fmt(rate)} jobs/s, ${fmt(pruned)} rows/s pruned, stopped in ${fmt(stopMs)} ms`,
      )
    }
  }
  // One call alone, on what the rounds left: up to 50 batches of 1,000 per queue.
  const before = await historyLeft()
  const started = performance.now()
  await runMaintenance({ connectionString: db.url, schema: SCHEMA })
  const alone = perSecond(before - (await historyLeft()), performance.now() - started)
  const none = median(rows.get('none')?.drain ?? [])
  return {
    data: { alone, rounds: Object.fromEntries(rows) },
    lines: [
      `### Pruning beside a drain (${fmt(SIZES.history)} completed jobs past their retention; median of ${SIZES.rounds} rounds, range)`,
      '',
      `One runMaintenance call alone, after the rounds, pruned ${fmt(alone)} rows/s (${fmt(before)} rows were left).`,
      '',
      '| pruner | drain, jobs/s | ÷ no pruner | rows pruned/s meanwhile | pruner stopped in, ms |',
      '| --- | --- | --- | --- | --- |',
      ...pruners.map((p) => {
        const x = rows.get(p) ?? { drain: [], pruned: [], stopMs: [] }
        return `| ${p} | ${range(x.drain)} | ${fmt(median(x.drain) / none, 2)}× | ${p === 'none' ? '—' : range(x.pruned)} | ${p === 'none' ? '—' : range(x.stopMs)} |`
      }),
    ],
  }
}

async function longDrain(): Promise<Part> {
  const db = await openDb('pgonce_hist_long')
  try {
    await db.admin.query(
      `insert into ${SCHEMA}.jobs (queue, name, data) select 'long', 'job', '{}' from generate_series(1, $1::int)`,
      [SIZES.longDrain],
    )
    const {
      rows: [av],
    } = await db.admin.query<{ setting: string }>("select setting from pg_settings where name = 'autovacuum'")
    const at: number[] = []
    const whole = await drain(db, 'long', SIZES.longDrain, { every: SIZES.slice, slice: (ms) => at.push(ms) })
    const slices = at.map((ms, k) => perSecond(SIZES.slice, ms - (at[k - 1] ?? 0)))
    const [head, tail] = [median(slices.slice(0, 3)), median(slices.slice(-3))]
    return {
      data: { whole, slices },
      lines: [
        `### A long drain with no vacuum (${fmt(SIZES.longDrain)} jobs of one INSERT, slices of ${fmt(SIZES.slice)}; server autovacuum ${av?.setting})`,
        '',
        `${fmt(whole)} jobs/s in all; the first three slices ${fmt(head)}, the last three ${fmt(tail)} jobs/s (${fmt(tail / head, 2)}×).`,
        '',
        `Slices: ${slices.map((x) => fmt(x)).join(', ')}.`,
      ],
    }
  } finally {
    await db.close()
  }
}

const startedAt = new Date()
const opened: Db[] = []
try {
  const machine = await describeMachine(serverUrl, 'DATABASE_URL', null)
  log(`sizes ${JSON.stringify(SIZES)}`)
  const empty = await openDb('pgonce_hist_empty')
  opened.push(empty)
  const history = await openDb('pgonce_hist_full')
  opened.push(history)
  await loadHistory(history, SIZES.history)
  log(`part 1: ${fmt(SIZES.history)} completed jobs loaded`)
  const part1 = await historyAgainstEmpty(empty, history)
  const part2 = await pruning(history)
  for (const db of opened.splice(0)) await db.close()
  const part3 = await longDrain()
  const text = [
    `## pgonce with a long history (${startedAt.toISOString().slice(0, 10)}, ${machine.host}, ${machine.cpus} × ${machine.cpuModel}, ${machine.postgres})`,
    '',
    ...part1.lines,
    '',
    ...part2.lines,
    '',
    ...part3.lines,
    '',
  ].join('\n')
  process.stdout.write(text)
  const data = {
    startedAt,
    seconds: (Date.now() - startedAt.getTime()) / 1000,
    machine,
    sizes: SIZES,
    historyAgainstEmpty: part1.data,
    pruning: part2.data,
    longDrain: part3.data,
  }
  writeResultFile(resultStem('history-', startedAt, machine.host, SCALE, false), data, SCALE !== 1, log)
} finally {
  for (const db of opened) await db.close().catch(() => {})
}
