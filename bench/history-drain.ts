// Part 3 of bench/history.ts: claim cost over a long drain, with pgonce's per-table autovacuum settings (migration
// 000005) against PostgreSQL's defaults (`ALTER TABLE … RESET`), each in a fresh database, throughput and the jobs
// table's statistics recorded every slice. On a server with autovacuum off (the CI server here has it off globally),
// per-table settings do nothing: the drain is then run as the server does it (no vacuum at all), and each setting
// again under an emulation of autovacuum's trigger rule in the bench (see `AutovacuumEmulator`), never by changing
// the server.

import type pg from 'pg'
import { BenchDatabase, SCHEMA, type TableStats, drain, jobsStats, log } from './history-db.js'

const QUEUE = 'long'
/** The storage parameters migration 000005 sets on jobs, reset for the PostgreSQL-defaults runs. */
const JOBS_PARAMETERS = ['autovacuum_vacuum_scale_factor', 'autovacuum_vacuum_threshold', 'autovacuum_vacuum_insert_scale_factor',
  'autovacuum_analyze_scale_factor', 'autovacuum_vacuum_cost_limit']

export type TableSettings = 'pgonce' | 'postgres-defaults'
/** `server`: whatever the server's autovacuum does; `emulated`: the bench's emulation of its rule (server has it off). */
export type VacuumSource = 'server' | 'emulated'

export interface ServerAutovacuum {
  on: boolean
  naptimeS: number
  costDelayMs: number
  /** Effective cost limit (autovacuum_vacuum_cost_limit, or vacuum_cost_limit when that is -1). */
  costLimit: number
  settings: Record<string, string>
}

export interface Slice {
  /** Completions at the end of the slice. */
  completed: number
  /** ms since the first handler start. */
  atMs: number
  /** Jobs/s within the slice. */
  perSecond: number
  stats: TableStats
}

export interface VacuumEvent {
  kind: 'vacuum' | 'vacuum analyze' | 'analyze'
  /** ms since the drain's first handler start (about: the emulator's clock starts with the Worker). */
  startedAtMs: number
  ms: number
  /** What triggered it: n_dead_tup, n_ins_since_vacuum or n_mod_since_analyze against its threshold. */
  reason: string
}

export interface LongDrainRun {
  label: string
  table: TableSettings
  vacuum: VacuumSource | 'none'
  reloptions: string[]
  jobs: number
  loadMs: number
  drainMs: number
  perSecond: number
  slices: Slice[]
  /** The emulator's vacuums and analyzes (emulated runs only). */
  events: VacuumEvent[]
  /** Stats at the end of the drain. */
  end: TableStats
}

export async function serverAutovacuum(admin: pg.Pool): Promise<ServerAutovacuum> {
  const { rows } = await admin.query<{ name: string; setting: string }>(
    `select name, setting from pg_settings where name like 'autovacuum%' or name in ('vacuum_cost_limit', 'vacuum_cost_delay', 'track_counts')`)
  const settings = Object.fromEntries(rows.map((r) => [r.name, r.setting]))
  const limit = Number(settings.autovacuum_vacuum_cost_limit)
  return {
    on: settings.autovacuum === 'on' && settings.track_counts === 'on',
    naptimeS: Number(settings.autovacuum_naptime),
    costDelayMs: Number(settings.autovacuum_vacuum_cost_delay),
    costLimit: limit > 0 ? limit : Number(settings.vacuum_cost_limit),
    settings,
  }
}

/** The thresholds autovacuum applies to pgonce.jobs: its reloptions, else the server's autovacuum_* settings. */
interface Thresholds {
  vacuumBase: number
  vacuumScale: number
  insertBase: number
  insertScale: number
  analyzeBase: number
  analyzeScale: number
  costLimit: number
}

async function thresholds(db: BenchDatabase, server: ServerAutovacuum): Promise<Thresholds> {
  const [row] = await db.query<{ reloptions: string[] | null }>(`select reloptions from pg_class where oid = '${SCHEMA}.jobs'::regclass`)
  const options = Object.fromEntries((row?.reloptions ?? []).map((o) => o.split('=') as [string, string]))
  const pick = (name: string): number => Number(options[name] ?? server.settings[name])
  const limit = Number(options.autovacuum_vacuum_cost_limit ?? -1)
  return {
    vacuumBase: pick('autovacuum_vacuum_threshold'),
    vacuumScale: pick('autovacuum_vacuum_scale_factor'),
    insertBase: pick('autovacuum_vacuum_insert_threshold'),
    insertScale: pick('autovacuum_vacuum_insert_scale_factor'),
    analyzeBase: pick('autovacuum_analyze_threshold'),
    analyzeScale: pick('autovacuum_analyze_scale_factor'),
    costLimit: limit > 0 ? limit : server.costLimit,
  }
}

/**
 * Autovacuum's decision for one table, done by the bench where the server's autovacuum is off: every naptime
 * (the server's `autovacuum_naptime`; the launcher visits each database once per naptime) it reads the table's
 * n_dead_tup, n_ins_since_vacuum, n_mod_since_analyze and reltuples, applies the rule of PostgreSQL's
 * relation_needs_vacanalyze (threshold + scale factor × reltuples, from the table's reloptions or the server's
 * settings), and runs VACUUM and/or ANALYZE of it with autovacuum's cost delay and the table's cost limit set in its
 * session. Not autovacuum itself: one worker, never cancelled by a lock conflict, its first check one naptime after
 * the drain starts (the launcher's phase is arbitrary), counted as manual vacuums in pg_stat_user_tables.
 */
class AutovacuumEmulator {
  readonly events: VacuumEvent[] = []
  private stopped = false
  private loop: Promise<void> = Promise.resolve()
  private wake: () => void = () => {}

  constructor(private readonly db: BenchDatabase, private readonly server: ServerAutovacuum, private readonly limits: Thresholds,
    private readonly clock: () => number) {}

  start(): void {
    this.loop = this.run().catch((err: Error) => log(`autovacuum emulator failed: ${err.message}`))
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.wake()
    await this.loop
  }

  private async run(): Promise<void> {
    const client = await this.db.admin.connect()
    try {
      await client.query(`set vacuum_cost_delay = '${this.server.costDelayMs}ms'`)
      await client.query(`set vacuum_cost_limit = ${this.limits.costLimit}`)
      for (;;) {
        await new Promise<void>((resolve) => {
          this.wake = resolve
          setTimeout(resolve, this.server.naptimeS * 1000)
        })
        if (this.stopped) return
        const [row] = (await client.query<{ reltuples: number; dead: string; ins: string; mod: string }>(
          `select greatest(c.reltuples, 0)::float8 as reltuples, s.n_dead_tup as dead, s.n_ins_since_vacuum as ins,
                  s.n_mod_since_analyze as mod
           from pg_class c join pg_stat_user_tables s on s.relid = c.oid where c.oid = '${SCHEMA}.jobs'::regclass`)).rows
        if (!row) continue
        const l = this.limits
        const reasons: string[] = []
        const vacThreshold = l.vacuumBase + l.vacuumScale * row.reltuples
        const insThreshold = l.insertBase + l.insertScale * row.reltuples
        const anlThreshold = l.analyzeBase + l.analyzeScale * row.reltuples
        if (Number(row.dead) > vacThreshold) reasons.push(`n_dead_tup ${row.dead} > ${Math.round(vacThreshold)}`)
        if (Number(row.ins) > insThreshold) reasons.push(`n_ins_since_vacuum ${row.ins} > ${Math.round(insThreshold)}`)
        const vacuum = reasons.length > 0
        const analyze = Number(row.mod) > anlThreshold
        if (analyze) reasons.push(`n_mod_since_analyze ${row.mod} > ${Math.round(anlThreshold)}`)
        if (!vacuum && !analyze) continue
        const kind = vacuum && analyze ? 'vacuum analyze' : vacuum ? 'vacuum' : 'analyze'
        const startedAtMs = this.clock()
        const started = performance.now()
        await client.query(`${kind} ${SCHEMA}.jobs`)
        const event: VacuumEvent = { kind, startedAtMs, ms: performance.now() - started, reason: reasons.join('; ') }
        this.events.push(event)
        log(`  emulated ${kind} at ${(startedAtMs / 1000).toFixed(0)} s took ${(event.ms / 1000).toFixed(1)} s (${event.reason})`)
      }
    } finally {
      client.release()
    }
  }
}

export interface LongDrainSpec {
  label: string
  table: TableSettings
  vacuum: VacuumSource | 'none'
}

/** The runs for this server: both settings under the server's autovacuum, or (autovacuum off) none, then both emulated. */
export function longDrainSpecs(server: ServerAutovacuum, emulate: boolean): LongDrainSpec[] {
  if (server.on) {
    return [
      { label: "pgonce's settings, server autovacuum", table: 'pgonce', vacuum: 'server' },
      { label: 'PostgreSQL defaults, server autovacuum', table: 'postgres-defaults', vacuum: 'server' },
    ]
  }
  return [
    { label: 'no vacuum (this server: autovacuum = off)', table: 'pgonce', vacuum: 'none' },
    ...(emulate ? [
      { label: "pgonce's settings, emulated autovacuum", table: 'pgonce', vacuum: 'emulated' },
      { label: 'PostgreSQL defaults, emulated autovacuum', table: 'postgres-defaults', vacuum: 'emulated' },
    ] satisfies LongDrainSpec[] : []),
  ]
}

/**
 * One long drain in a fresh database `name`: `jobs` waiting jobs inserted in one INSERT … SELECT (untimed), VACUUM
 * ANALYZE + CHECKPOINT, then a Worker (concurrency 16, its defaults) drains them; every `slice` completions the
 * slice's jobs/s and the table's statistics are recorded.
 */
export async function longDrain(serverUrl: string, name: string, spec: LongDrainSpec, jobs: number, slice: number,
  server: ServerAutovacuum): Promise<LongDrainRun> {
  const db = await BenchDatabase.create(serverUrl, name)
  try {
    if (spec.table === 'postgres-defaults') await db.query(`alter table ${SCHEMA}.jobs reset (${JOBS_PARAMETERS.join(', ')})`)
    const [rel] = await db.query<{ reloptions: string[] | null }>(`select reloptions from pg_class where oid = '${SCHEMA}.jobs'::regclass`)
    const loadStarted = performance.now()
    await db.query(`insert into ${SCHEMA}.jobs (queue, name, data) select $1, 'job', jsonb_build_object('i', g) from generate_series(1, $2::int) g`,
      [QUEUE, jobs])
    const loadMs = performance.now() - loadStarted
    await db.vacuumAnalyze()
    log(`${spec.label}: ${jobs.toLocaleString('en-US')} jobs queued in ${(loadMs / 1000).toFixed(1)} s; draining`)
    let drainStarted = 0
    const clock = (): number => (drainStarted === 0 ? 0 : performance.now() - drainStarted)
    const emulator = spec.vacuum === 'emulated' ? new AutovacuumEmulator(db, server, await thresholds(db, server), clock) : null
    const slices: Slice[] = []
    let sampling: Promise<void> = Promise.resolve()
    let previous = { completed: 0, atMs: 0 }
    const at = (completed: number, atMs: number): void => {
      const perSecond = ((completed - previous.completed) * 1000) / (atMs - previous.atMs)
      previous = { completed, atMs }
      // Sampled in order, off the Worker's path.
      sampling = sampling.then(async () => {
        slices.push({ completed, atMs, perSecond, stats: await jobsStats(db) })
      })
      if (completed % (slice * 10) === 0) log(`  ${completed.toLocaleString('en-US')} done, ${Math.round(perSecond)} jobs/s in the last slice`)
    }
    drainStarted = performance.now()
    emulator?.start()
    let timing
    try {
      timing = await drain(db, QUEUE, jobs, { slices: { every: slice, at } })
    } finally {
      await emulator?.stop()
    }
    await sampling
    return {
      label: spec.label, table: spec.table, vacuum: spec.vacuum, reloptions: rel?.reloptions ?? [], jobs, loadMs,
      drainMs: timing.ms, perSecond: timing.perSecond, slices, events: emulator?.events ?? [], end: await jobsStats(db),
    }
  } finally {
    await db.close()
  }
}
