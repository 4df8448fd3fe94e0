// Shared by bench/history.ts and bench/history-drain.ts: a fresh database migrated by pgonce, the timed add and drain
// sections (through pgonce's public API), and the jobs table's statistics.

import pg from 'pg'
import { Queue, Worker, migrate } from '../src/index.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { perSecond, runProducers, within } from './measure.js'
import { maintain } from './workloads/context.js'

export const SCHEMA = 'pgonce'
export const PRODUCERS = 16
export const CONCURRENCY = 16
const BULK = 1000
const DRAIN_DEADLINE_MS = 600_000

export const log = (message: string): void => {
  process.stderr.write(`[bench:history] ${new Date().toISOString().slice(11, 19)} ${message}\n`)
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** One timed section: how many operations, in how long. */
export interface Timing {
  ops: number
  ms: number
  perSecond: number
}

const timing = (ops: number, ms: number): Timing => ({ ops, ms, perSecond: perSecond(ops, ms) })

export interface WorkerSettings {
  /** The Worker's own housekeeping interval (its default 5 s when undefined; 0 turns it off). */
  maintenanceIntervalMs?: number
  /** Called every `every` completions with the count and ms since the first handler start. */
  slices?: { every: number; at: (completed: number, ms: number) => void }
}

/** A fresh database on the server, migrated by pgonce, with a pool for Queues and one for the bench's own queries. */
export class BenchDatabase {
  private readonly queues = new Map<string, Queue>()

  private constructor(readonly serverUrl: string, readonly name: string, readonly url: string,
    readonly pool: pg.Pool, readonly admin: pg.Pool) {}

  static async create(serverUrl: string, name: string): Promise<BenchDatabase> {
    const url = await freshDatabase(serverUrl, name)
    const pool = new pg.Pool({ connectionString: url, max: PRODUCERS })
    const admin = new pg.Pool({ connectionString: url, max: 2 })
    // A forced drop at the end can reach a closing client: no 'error' event may go unheard (see bench/databases.ts).
    pool.on('error', () => {})
    admin.on('error', () => {})
    await migrate({ pool, schema: SCHEMA })
    return new BenchDatabase(serverUrl, name, url, pool, admin)
  }

  queue(name: string): Queue {
    let queue = this.queues.get(name)
    if (!queue) {
      queue = new Queue(name, { pool: this.pool, schema: SCHEMA, migrate: false })
      this.queues.set(name, queue)
    }
    return queue
  }

  async query<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    return (await this.admin.query<R>(text, values)).rows
  }

  /** `VACUUM ANALYZE` of the database and a `CHECKPOINT` (the main bench's "analysed" mode); returns the ms taken. */
  async vacuumAnalyze(): Promise<number> {
    const started = performance.now()
    await maintain(this.admin, 'analysed')
    return performance.now() - started
  }

  /** Jobs of `queue` not yet finished. */
  async unfinished(queue: string): Promise<number> {
    const [row] = await this.query<{ n: number }>(
      `select count(*)::int as n from ${SCHEMA}.jobs where queue = $1 and state in ('waiting', 'delayed', 'claimed', 'active')`, [queue])
    return row?.n ?? 0
  }

  /** Heap, index and total size of the jobs table, in bytes. */
  async jobsSize(): Promise<{ heapBytes: number; indexBytes: number; totalBytes: number }> {
    const [row] = await this.query<{ heap: string; idx: string; total: string }>(
      `select pg_relation_size(c.oid) as heap, pg_indexes_size(c.oid) as idx, pg_total_relation_size(c.oid) as total
       from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = $1 and c.relname = 'jobs'`, [SCHEMA])
    return { heapBytes: Number(row?.heap), indexBytes: Number(row?.idx), totalBytes: Number(row?.total) }
  }

  async close(drop = true): Promise<void> {
    for (const queue of this.queues.values()) await queue.close()
    this.queues.clear()
    await this.pool.end()
    await this.admin.end()
    if (drop) await dropDatabase(this.serverUrl, this.name)
  }
}

const LOAD_CHUNK = 1_000_000

/** Inserts `rows` completed jobs over `queues`, finished 1 to 4 hours ago, oldest first; returns ms. */
export async function loadHistory(db: BenchDatabase, rows: number, queues: readonly string[]): Promise<number> {
  const started = performance.now()
  for (let from = 1; from <= rows; from += LOAD_CHUNK) {
    const to = Math.min(rows, from + LOAD_CHUNK - 1)
    await db.query(
      `insert into ${SCHEMA}.jobs (queue, name, data, state, attempts, run_at, created_at, started_at, finished_at)
       select ($1::text[])[1 + g % cardinality($1::text[])], 'done', jsonb_build_object('i', g), 'completed', 1,
              t - interval '2 seconds', t - interval '2 seconds', t - interval '1 second', t
       from generate_series($2::bigint, $3::bigint) g,
            lateral (select now() - interval '1 hour' - interval '3 hours' * (($4::bigint - g)::float8 / $4::bigint) as t) f`,
      [queues, from, to, rows])
    log(`  history: ${to.toLocaleString('en-US')} of ${rows.toLocaleString('en-US')} rows (${((performance.now() - started) / 1000).toFixed(1)} s)`)
  }
  return performance.now() - started
}

/** `n` awaited `queue.add` calls, one after another. */
export async function sequentialAdds(db: BenchDatabase, queue: string, n: number): Promise<Timing> {
  const q = db.queue(queue)
  const started = performance.now()
  for (let i = 0; i < n; i++) await q.add('add', { i })
  return timing(n, performance.now() - started)
}

/** `n` `queue.add` calls from PRODUCERS concurrent producers. */
export async function concurrentAdds(db: BenchDatabase, queue: string, n: number): Promise<Timing> {
  const q = db.queue(queue)
  const ms = await runProducers(n, PRODUCERS, async (i) => {
    await q.add('add', { i })
  })
  return timing(n, ms)
}

/** Untimed: `n` no-op jobs into `queue` through `queue.addBulk`, in batches of 1,000. */
export async function enqueue(db: BenchDatabase, queue: string, n: number): Promise<void> {
  const q = db.queue(queue)
  for (let from = 0; from < n; from += BULK) {
    await q.addBulk(Array.from({ length: Math.min(BULK, n - from) }, (_, k) => ({ name: 'job', data: { i: from + k } })))
  }
}

/**
 * Drains the `n` jobs queued in `queue` with a Worker (concurrency 16, no-op handler): timed from the first handler
 * start to the `n`th completion stored (the Worker's 'completed' event fires once its completion has committed).
 */
export async function drain(db: BenchDatabase, queue: string, n: number, settings: WorkerSettings = {}): Promise<Timing> {
  const queued = await db.unfinished(queue)
  if (queued !== n) throw new Error(`${db.name}: ${queued} unfinished jobs in ${queue}, expected ${n}`)
  let first = 0
  let last = 0
  let completed = 0
  let done: () => void = () => {}
  const finished = new Promise<void>((resolve) => {
    done = resolve
  })
  const worker = new Worker(queue, async () => {
    if (first === 0) first = performance.now()
  }, {
    connectionString: db.url, schema: SCHEMA, concurrency: CONCURRENCY, migrate: false,
    ...(settings.maintenanceIntervalMs === undefined ? {} : { maintenanceIntervalMs: settings.maintenanceIntervalMs }),
  })
  worker.on('error', (err) => log(`${db.name} worker error: ${err.message}`))
  worker.on('completed', () => {
    completed++
    last = performance.now()
    if (settings.slices && completed % settings.slices.every === 0) settings.slices.at(completed, last - first)
    if (completed === n) done()
  })
  try {
    await within(finished, DRAIN_DEADLINE_MS, `${n} completions in ${db.name}`)
  } finally {
    await worker.close()
  }
  const left = await db.unfinished(queue)
  if (left !== 0) throw new Error(`${db.name}: ${left} jobs of ${queue} unfinished after the drain`)
  return timing(n, last - first)
}

/** The jobs table's row of pg_stat_user_tables (counts as numbers), and whether a VACUUM of it is in progress. */
export interface TableStats {
  liveTuples: number
  deadTuples: number
  modSinceAnalyze: number
  insSinceVacuum: number
  vacuumCount: number
  autovacuumCount: number
  analyzeCount: number
  autoanalyzeCount: number
  vacuumRunning: boolean
}

export async function jobsStats(db: BenchDatabase): Promise<TableStats> {
  const [row] = await db.query<Record<string, string | boolean>>(
    `select n_live_tup as live, n_dead_tup as dead, n_mod_since_analyze as mod, n_ins_since_vacuum as ins,
            vacuum_count as vac, autovacuum_count as autovac, analyze_count as anl, autoanalyze_count as autoanl,
            exists (select 1 from pg_stat_progress_vacuum p where p.relid = s.relid) as running
     from pg_stat_user_tables s where schemaname = $1 and relname = 'jobs'`, [SCHEMA])
  const n = (key: string): number => Number(row?.[key] ?? 0)
  return {
    liveTuples: n('live'), deadTuples: n('dead'), modSinceAnalyze: n('mod'), insSinceVacuum: n('ins'),
    vacuumCount: n('vac'), autovacuumCount: n('autovac'), analyzeCount: n('anl'), autoanalyzeCount: n('autoanl'),
    vacuumRunning: row?.running === true,
  }
}

/** Median, low and high of `values`. */
export interface Spread {
  median: number
  min: number
  max: number
  n: number
}

export function spread(values: number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  const median = sorted.length === 0 ? Number.NaN
    : sorted.length % 2 === 1 ? sorted[mid] as number : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
  return { median, min: sorted[0] ?? Number.NaN, max: sorted[sorted.length - 1] ?? Number.NaN, n: sorted.length }
}
