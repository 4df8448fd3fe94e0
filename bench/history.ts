// `npm run bench:history`: does a jobs table with a long history of completed jobs, and its pruning, slow adds and
// claims? In one run, on the server at DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test; only databases
// of its own are created and dropped, never the schemas of the database in the URL):
//
//   1. history vs empty: two fresh databases migrated by pgonce, one with BENCH_HISTORY_ROWS completed jobs inserted
//      straight into pgonce.jobs; sequential adds, adds from 16 producers and a 16-way Worker drain timed in both,
//      alternated over BENCH_HISTORY_ROUNDS rounds (median and range);
//   2. pruning: the history made prunable (setRetention), runMaintenance rounds timed until nothing is left (rows/s,
//      alone and while the same adds and drains run), those adds and drains before, during and after pruning;
//   3. autovacuum over a long drain: BENCH_HISTORY_LONG_DRAIN queued jobs drained by a Worker, jobs/s and the table's
//      statistics per slice, with pgonce's per-table autovacuum settings and with PostgreSQL's defaults
//      (bench/history-drain.ts; emulated when the server's autovacuum is off).
//
// Markdown on stdout, progress on stderr, every figure in bench/results/history-<date>-<host>[-partial][-n].json.
// Method and results: bench/README.md, "History and pruning" and "Autovacuum over a long drain".

import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import pg from 'pg'
import { runMaintenance } from '../src/index.js'
import { type LongDrainRun, type ServerAutovacuum, longDrain, longDrainSpecs, serverAutovacuum } from './history-drain.js'
import {
  BenchDatabase, SCHEMA, type Spread, type Timing, concurrentAdds, drain, enqueue, loadHistory, log, sequentialAdds,
  spread,
} from './history-db.js'
import { describeMachine } from './machine.js'
import type { Machine } from './run-result.js'

const DEFAULTS = {
  BENCH_HISTORY_ROWS: 5_000_000,
  BENCH_HISTORY_QUEUES: 10,
  BENCH_HISTORY_SEQ_ADDS: 3_000,
  BENCH_HISTORY_CONC_ADDS: 10_000,
  BENCH_HISTORY_DRAIN_JOBS: 50_000,
  BENCH_HISTORY_ROUNDS: 3,
  BENCH_HISTORY_PRUNE: 1,
  BENCH_HISTORY_LONG_DRAIN: 1_000_000,
  BENCH_HISTORY_SLICE: 25_000,
  BENCH_HISTORY_EMULATE: 1,
} as const
type SizeName = keyof typeof DEFAULTS

function sizeFromEnv(name: SizeName): number {
  const raw = process.env[name]
  if (raw === undefined || raw.trim() === '') return DEFAULTS[name]
  const value = Number(raw.replace(/_/g, ''))
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`)
  return value
}

const SIZES = Object.fromEntries(Object.keys(DEFAULTS).map((k) => [k, sizeFromEnv(k as SizeName)])) as Record<SizeName, number>
const MATERIAL = 0.15
const EMPTY_DB = 'pgonce_hist_empty'
const HISTORY_DB = 'pgonce_hist_5m'
const DRAIN_DB = 'pgonce_hist_drain'
const ADDS = 'adds'
const DRAINED = 'drain'
/** Queues holding the history: the two measured ones and the others. */
const HISTORY_QUEUES = [ADDS, DRAINED, ...Array.from({ length: Math.max(0, SIZES.BENCH_HISTORY_QUEUES - 2) }, (_, i) => `other-${i + 3}`)]
/** The history finished 1 to 4 hours ago: inside the default 24 h retention, and past this one (part 2). */
const PRUNE_RETENTION_MS = 30 * 60 * 1000
/** Part 2 prunes this share of the history alone before the adds and drains start beside it. */
const PRUNE_ALONE_SHARE = 0.2

const fmt = (n: number, digits = 0): string => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '—')
const seconds = (ms: number): string => `${fmt(ms / 1000, 1)} s`
const mb = (bytes: number): string => `${fmt(bytes / 2 ** 20)} MB`

// ---------------------------------------------------------------------------------------------------------------------
// Part 1: history vs empty

/** The three timed sections, in order, on one database. */
interface SuiteRun {
  sequential: Timing
  concurrent: Timing
  drain: Timing
  /** ms since the start of the run. */
  startedAt: number
  endedAt: number
}

const SECTIONS = ['sequential', 'concurrent', 'drain'] as const
type Section = (typeof SECTIONS)[number]
const SECTION_LABEL: Record<Section, () => string> = {
  sequential: () => `${fmt(SIZES.BENCH_HISTORY_SEQ_ADDS)} sequential awaited \`queue.add\` (adds/s)`,
  concurrent: () => `${fmt(SIZES.BENCH_HISTORY_CONC_ADDS)} \`queue.add\` from 16 producers (adds/s)`,
  drain: () => `${fmt(SIZES.BENCH_HISTORY_DRAIN_JOBS)} queued no-op jobs, Worker concurrency 16 (jobs/s)`,
}

const runStarted = performance.now()
const sinceStart = (): number => performance.now() - runStarted

/**
 * Sequential adds, concurrent adds, then a drain of freshly queued jobs (queued untimed through addBulk).
 * `vacuum`: VACUUM ANALYZE + CHECKPOINT before the adds and again before the drain.
 */
async function suite(db: BenchDatabase, vacuum: boolean, maintenanceIntervalMs?: number): Promise<SuiteRun> {
  const startedAt = sinceStart()
  if (vacuum) await db.vacuumAnalyze()
  const sequential = await sequentialAdds(db, ADDS, SIZES.BENCH_HISTORY_SEQ_ADDS)
  const concurrent = await concurrentAdds(db, ADDS, SIZES.BENCH_HISTORY_CONC_ADDS)
  await enqueue(db, DRAINED, SIZES.BENCH_HISTORY_DRAIN_JOBS)
  if (vacuum) await db.vacuumAnalyze()
  const drained = await drain(db, DRAINED, SIZES.BENCH_HISTORY_DRAIN_JOBS,
    maintenanceIntervalMs === undefined ? {} : { maintenanceIntervalMs })
  const run = { sequential, concurrent, drain: drained, startedAt, endedAt: sinceStart() }
  log(`  ${db.name}: ${SECTIONS.map((s) => `${s} ${fmt(run[s].perSecond)}/s`).join(', ')}`)
  return run
}

/** Untimed: connections, prepared statements and the JIT warm before the first timed section. */
async function warmUp(db: BenchDatabase): Promise<void> {
  await concurrentAdds(db, ADDS, 320)
  await enqueue(db, DRAINED, 2000)
  await drain(db, DRAINED, 2000)
}


interface Comparison {
  section: Section
  empty: Spread
  history: Spread
  /** history median ÷ empty median. */
  ratio: number
}

const compare = (section: Section, a: SuiteRun[], b: SuiteRun[]): Comparison => {
  const empty = spread(a.map((r) => r[section].perSecond))
  const history = spread(b.map((r) => r[section].perSecond))
  return { section, empty, history, ratio: history.median / empty.median }
}

// ---------------------------------------------------------------------------------------------------------------------
// Part 2: pruning

interface PruneCall {
  /** ms since the start of the run. */
  startedAt: number
  ms: number
  pruned: number
  ran: boolean
  /** The adds and drains were running beside this call. */
  underLoad: boolean
}

interface PruningResult {
  prunableRows: number
  sizeBefore: Awaited<ReturnType<BenchDatabase['jobsSize']>>
  sizeAfterPruning: Awaited<ReturnType<BenchDatabase['jobsSize']>>
  sizeAfterVacuum: Awaited<ReturnType<BenchDatabase['jobsSize']>>
  calls: PruneCall[]
  totalPruned: number
  totalMs: number
  alone: { rows: number; ms: number; perSecond: number }
  underLoad: { rows: number; ms: number; perSecond: number }
  before: SuiteRun[]
  /** Suites that started and ended while pruning ran. */
  during: SuiteRun[]
  /** Suites that started during pruning and ended after it (not counted as during). */
  overlapping: SuiteRun[]
  afterUnvacuumed: SuiteRun
  vacuumAfterPruningMs: number
  afterVacuum: SuiteRun
  deadTuplesAfterPruning: number
}

async function pruning(db: BenchDatabase): Promise<PruningResult> {
  // The Workers' own housekeeping is off in this part: the bench's runMaintenance loop is the only pruner.
  const noHousekeeping = 0
  for (const queue of HISTORY_QUEUES) await db.queue(queue).setRetention({ completedMs: PRUNE_RETENTION_MS })
  const [prunable] = await db.query<{ n: number }>(
    `select count(*)::int as n from ${SCHEMA}.jobs where state = 'completed' and finished_at < now() - make_interval(secs => $1::float8 / 1000)`,
    [PRUNE_RETENTION_MS])
  const prunableRows = prunable?.n ?? 0
  await db.vacuumAnalyze()
  const sizeBefore = await db.jobsSize()
  log(`part 2: ${fmt(prunableRows)} prunable rows; ${SIZES.BENCH_HISTORY_ROUNDS} runs before pruning`)
  const before: SuiteRun[] = []
  for (let r = 0; r < SIZES.BENCH_HISTORY_ROUNDS; r++) before.push(await suite(db, false, noHousekeeping))

  const prunePool = new pg.Pool({ connectionString: db.url, max: 1 })
  prunePool.on('error', () => {})
  const calls: PruneCall[] = []
  let underLoad = false
  let total = 0
  const pruneOnce = async (): Promise<boolean> => {
    const startedAt = sinceStart()
    const started = performance.now()
    const result = await runMaintenance({ pool: prunePool, schema: SCHEMA })
    calls.push({ startedAt, ms: performance.now() - started, pruned: result.pruned, ran: result.ran, underLoad })
    total += result.pruned
    log(`  runMaintenance: ${fmt(result.pruned)} pruned in ${seconds(performance.now() - started)}${underLoad ? ' (under load)' : ''}; ${fmt(total)} in all`)
    return result.ran && result.pruned === 0
  }
  const pruneStarted = performance.now()
  let pruneEndedAt = Number.POSITIVE_INFINITY
  let finished = false
  try {
    while (!finished && total < PRUNE_ALONE_SHARE * prunableRows) finished = await pruneOnce()
    underLoad = true
    const load = (async () => {
      const runs: SuiteRun[] = []
      while (!finished) runs.push(await suite(db, false, noHousekeeping))
      return runs
    })()
    // A failing load must not leave the prune loop running forever.
    load.catch(() => {
      finished = true
    })
    while (!finished) finished = await pruneOnce()
    pruneEndedAt = sinceStart()
    const loaded = await load
    const totalMs = performance.now() - pruneStarted
    const aloneCalls = calls.filter((c) => !c.underLoad)
    const loadedCalls = calls.filter((c) => c.underLoad)
    const rate = (cs: PruneCall[]): { rows: number; ms: number; perSecond: number } => {
      const rows = cs.reduce((s, c) => s + c.pruned, 0)
      const ms = cs.reduce((s, c) => s + c.ms, 0)
      return { rows, ms, perSecond: ms > 0 ? (rows * 1000) / ms : 0 }
    }
    const sizeAfterPruning = await db.jobsSize()
    const [dead] = await db.query<{ n: string }>(`select n_dead_tup as n from pg_stat_user_tables where schemaname = $1 and relname = 'jobs'`, [SCHEMA])
    log('part 2: after pruning, no VACUUM yet')
    const afterUnvacuumed = await suite(db, false, noHousekeeping)
    const vacuumAfterPruningMs = await db.vacuumAnalyze()
    log(`part 2: VACUUM ANALYZE after pruning took ${seconds(vacuumAfterPruningMs)}`)
    const afterVacuum = await suite(db, false, noHousekeeping)
    return {
      prunableRows, sizeBefore, sizeAfterPruning, sizeAfterVacuum: await db.jobsSize(), calls, totalPruned: total, totalMs,
      alone: rate(aloneCalls), underLoad: rate(loadedCalls), before,
      during: loaded.filter((r) => r.endedAt <= pruneEndedAt), overlapping: loaded.filter((r) => r.endedAt > pruneEndedAt),
      afterUnvacuumed, vacuumAfterPruningMs, afterVacuum, deadTuplesAfterPruning: Number(dead?.n ?? 0),
    }
  } finally {
    await prunePool.end()
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Report

interface HistoryRun {
  startedAt: string
  seconds: number
  machine: Machine
  git: { sha: string; dirty: boolean }
  loadavg: { start: string; end: string }
  sizes: Record<SizeName, number>
  material: number
  server: ServerAutovacuum
  part1: {
    loadMs: number
    vacuumMs: { empty: number; history: number }
    size: { empty: Awaited<ReturnType<BenchDatabase['jobsSize']>>; history: Awaited<ReturnType<BenchDatabase['jobsSize']>> }
    rounds: { empty: SuiteRun; history: SuiteRun; order: string }[]
    comparisons: Comparison[]
  }
  part2: PruningResult | null
  part3: LongDrainRun[]
  notes: string[]
}

/** A difference is called real only beyond ±MATERIAL and when the two ranges do not overlap. */
function verdict(base: Spread, other: Spread): string {
  const ratio = other.median / base.median
  if (!Number.isFinite(ratio)) return '—'
  const pct = Math.round(Math.abs(ratio - 1) * 100)
  if (Math.abs(ratio - 1) <= MATERIAL) return `within noise (±${MATERIAL * 100}%)`
  if (other.min <= base.max && base.min <= other.max) return `${pct}% ${ratio < 1 ? 'lower' : 'higher'}, ranges overlap: unclear`
  return ratio < 1 ? `**${pct}% slower**` : `**${pct}% faster**`
}

const cell = (s: Spread): string => (s.n === 0 ? '—' : s.n === 1 ? fmt(s.median) : `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`)

function part1Table(run: HistoryRun): string[] {
  const p = run.part1
  return [
    `### History vs empty (median of ${run.sizes.BENCH_HISTORY_ROUNDS} rounds, range in brackets)`,
    '',
    `| | empty history | ${fmt(run.sizes.BENCH_HISTORY_ROWS)} completed jobs | history ÷ empty | |`,
    '| --- | --- | --- | --- | --- |',
    ...p.comparisons.map((c) => `| ${SECTION_LABEL[c.section]()} | ${cell(c.empty)} | ${cell(c.history)} | ${fmt(c.ratio, 2)}× | ${verdict(c.empty, c.history)} |`),
    `| jobs table (heap + indexes) after loading, VACUUM | ${mb(p.size.empty.totalBytes)} | ${mb(p.size.history.totalBytes)} | | |`,
    '',
    `History loaded in ${seconds(p.loadMs)} (INSERT … SELECT generate_series over ${HISTORY_QUEUES.length} queues, the two measured ones among them); ` +
      `VACUUM ANALYZE + CHECKPOINT before every timed section (history database: ${seconds(p.vacuumMs.history)} the first time). Rounds alternate which database goes first.`,
  ]
}

function part2Table(run: HistoryRun): string[] {
  const p = run.part2
  if (!p) return ['### Pruning', '', 'Not run (BENCH_HISTORY_PRUNE=0).']
  const col = (runs: SuiteRun[], s: Section): Spread => spread(runs.map((r) => r[s].perSecond))
  const rows = SECTIONS.map((s) => {
    const before = col(p.before, s)
    const during = col(p.during, s)
    const ratio = during.median / before.median
    return `| ${SECTION_LABEL[s]()} | ${cell(before)} | ${cell(during)} | ${fmt(ratio, 2)}× | ${verdict(before, during)} | ${fmt(p.afterUnvacuumed[s].perSecond)} | ${fmt(p.afterVacuum[s].perSecond)} |`
  })
  return [
    '### Pruning',
    '',
    '| | figure |',
    '| --- | --- |',
    `| rows pruned | ${fmt(p.totalPruned)} of ${fmt(p.prunableRows)} prunable, in ${seconds(p.totalMs)} (${p.calls.length} runMaintenance calls, batches of 1,000) |`,
    `| pruning alone | ${fmt(p.alone.perSecond)} rows/s (${fmt(p.alone.rows)} rows) |`,
    `| pruning with the adds and drains below running | ${fmt(p.underLoad.perSecond)} rows/s (${fmt(p.underLoad.rows)} rows) |`,
    `| rows/s per runMaintenance call that pruned, median (range) | ${cell(spread(p.calls.filter((c) => c.pruned > 0).map((c) => (c.pruned * 1000) / c.ms)))} |`,
    `| jobs table before / after pruning / after VACUUM | ${mb(p.sizeBefore.totalBytes)} / ${mb(p.sizeAfterPruning.totalBytes)} / ${mb(p.sizeAfterVacuum.totalBytes)} |`,
    `| n_dead_tup after pruning; VACUUM ANALYZE then took | ${fmt(p.deadTuplesAfterPruning)}; ${seconds(p.vacuumAfterPruningMs)} |`,
    '',
    `| | before pruning (${p.before.length} runs) | during pruning (${p.during.length} runs) | during ÷ before | | after pruning, before VACUUM | after VACUUM |`,
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
    '',
    'No VACUUM between these runs (the server\'s autovacuum is ' + (run.server.on ? 'on' : 'off') + '); the Workers\' own housekeeping off, so that the bench\'s loop is the only pruner.' +
      (p.overlapping.length > 0 ? ` ${p.overlapping.length} run(s) that outlasted the pruning are in the JSON only.` : ''),
  ]
}

/** Slices grouped into at most `rows` rows: jobs/s of each group, n_dead_tup at its end, vacuums during it. */
function part3Table(run: HistoryRun, maxRows = 12): string[] {
  const runs = run.part3
  if (runs.length === 0) return ['### Autovacuum over a long drain', '', 'Not run (BENCH_HISTORY_LONG_DRAIN=0).']
  const sliceCount = Math.max(...runs.map((r) => r.slices.length))
  const group = Math.max(1, Math.ceil(sliceCount / maxRows))
  const lines = [
    `### Autovacuum over a long drain (${fmt(runs[0]?.jobs ?? 0)} queued jobs; jobs/s per ${fmt(group * run.sizes.BENCH_HISTORY_SLICE)} jobs, n_dead_tup at the end of each, † a VACUUM ran during it)`,
    '',
    `| jobs done | ${runs.map((r) => r.label).join(' | ')} |`,
    `| --- | ${runs.map(() => '---').join(' | ')} |`,
  ]
  for (let g = 0; g * group < sliceCount; g++) {
    const cells = runs.map((r) => {
      const slices = r.slices.slice(g * group, (g + 1) * group)
      const last = slices[slices.length - 1]
      if (!last) return '—'
      const startMs = g === 0 ? 0 : r.slices[g * group - 1]?.atMs ?? 0
      const jobs = last.completed - (g === 0 ? 0 : r.slices[g * group - 1]?.completed ?? 0)
      const vacuumed = slices.some((s) => s.stats.vacuumRunning) ||
        r.events.some((e) => e.kind !== 'analyze' && e.startedAtMs < last.atMs && e.startedAtMs + e.ms > startMs)
      return `${fmt((jobs * 1000) / (last.atMs - startMs))}${vacuumed ? ' †' : ''} · ${fmt(last.stats.deadTuples)} dead`
    })
    const upTo = runs[0]?.slices[Math.min(sliceCount, (g + 1) * group) - 1]?.completed ?? (g + 1) * group * run.sizes.BENCH_HISTORY_SLICE
    lines.push(`| ${fmt(upTo)} | ${cells.join(' | ')} |`)
  }
  const firstLast = (r: LongDrainRun): string => {
    const head = spread(r.slices.slice(0, 3).map((s) => s.perSecond)).median
    const tail = spread(r.slices.slice(-3).map((s) => s.perSecond)).median
    return `${fmt(head)} → ${fmt(tail)} (${fmt(tail / head, 2)}×)`
  }
  lines.push(
    `| **whole drain (jobs/s)** | ${runs.map((r) => `**${fmt(r.perSecond)}** in ${seconds(r.drainMs)}`).join(' | ')} |`,
    `| first 3 → last 3 slices (median jobs/s) | ${runs.map(firstLast).join(' | ')} |`,
    `| vacuums during the drain | ${runs.map((r) => r.vacuum === 'emulated'
      ? `${r.events.filter((e) => e.kind !== 'analyze').length} (${r.events.map((e) => `${e.kind} at ${fmt(e.startedAtMs / 1000)} s, ${seconds(e.ms)}`).join('; ') || 'none'})`
      : `${r.end.autovacuumCount} autovacuum, ${r.end.autoanalyzeCount} autoanalyze`).join(' | ')} |`,
    `| jobs reloptions | ${runs.map((r) => (r.reloptions.length ? r.reloptions.map((o) => `\`${o}\``).join(', ') : 'none (defaults)')).join(' | ')} |`,
  )
  const s = run.server
  lines.push('', `Server: autovacuum = ${s.on ? 'on' : 'off'}, autovacuum_naptime = ${s.naptimeS} s, autovacuum_vacuum_cost_delay = ${s.costDelayMs} ms, ` +
    `effective cost limit ${s.costLimit}, autovacuum_vacuum_scale_factor = ${s.settings.autovacuum_vacuum_scale_factor}, ` +
    `autovacuum_vacuum_threshold = ${s.settings.autovacuum_vacuum_threshold}.` +
    (s.on ? '' : ' With autovacuum off, per-table settings change nothing on this server: the emulated runs apply autovacuum\'s rule from the bench (see bench/history-drain.ts), first check one naptime after the drain starts.'))
  return lines
}

function renderMarkdown(run: HistoryRun): string {
  return [
    `## pgonce history and pruning bench (${run.startedAt.slice(0, 10)}, ${run.machine.host})`,
    '',
    ...part1Table(run), '',
    ...part2Table(run), '',
    ...part3Table(run), '',
    ...run.notes.map((n) => `- ${n}`),
    '',
  ].join('\n')
}

function gitState(): { sha: string; dirty: boolean } {
  const git = (...args: string[]): string => {
    try {
      return execFileSync('git', args, { cwd: new URL('../', import.meta.url), encoding: 'utf8' }).trim()
    } catch {
      return ''
    }
  }
  return { sha: git('rev-parse', 'HEAD') || 'unknown', dirty: git('status', '--porcelain', '--untracked-files=no', '--', 'src', 'sql', 'migrations') !== '' }
}

const loadavg = (): string => readFileSync('/proc/loadavg', 'utf8').trim().split(' ').slice(0, 3).join(' ')

function writeResult(run: HistoryRun): void {
  const dir = new URL('./results/', import.meta.url)
  mkdirSync(dir, { recursive: true })
  // As bench/run.ts: a run with other sizes is `-partial` and replaces the previous partial file; a run at the
  // defaults never overwrites an earlier one of the same day (-2, -3, …).
  const partial = (Object.keys(DEFAULTS) as SizeName[]).some((k) => SIZES[k] !== DEFAULTS[k])
  const stem = `history-${run.startedAt.slice(0, 10)}-${hostname().replace(/[^A-Za-z0-9_.-]/g, '_')}${partial ? '-partial' : ''}`
  for (let n = 1; ; n++) {
    const file = new URL(`${stem}${n === 1 ? '' : `-${n}`}.json`, dir)
    try {
      writeFileSync(file, `${JSON.stringify(run, null, 2)}\n`, { flag: partial ? 'w' : 'wx' })
      log(`wrote ${file.pathname}`)
      return
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// The run

const serverUrl = process.env.DATABASE_URL?.trim() || 'postgres://postgres@127.0.0.1:5432/test'
const startedAt = new Date()
const loadStart = loadavg()
const opened: BenchDatabase[] = []
const open = async (name: string): Promise<BenchDatabase> => {
  const db = await BenchDatabase.create(serverUrl, name)
  opened.push(db)
  return db
}
const closeAll = async (): Promise<void> => {
  for (const db of opened.splice(0)) await db.close().catch((err: Error) => log(`dropping ${db.name}: ${err.message}`))
}
process.once('SIGINT', () => void closeAll().then(() => process.exit(130)))

try {
  log(`sizes ${JSON.stringify(SIZES)}; load average ${loadStart}`)
  const machine = await describeMachine(serverUrl, 'env', null)
  const empty = await open(EMPTY_DB)
  const history = await open(HISTORY_DB)
  const server = await serverAutovacuum(empty.admin)
  log(`server autovacuum ${server.on ? 'on' : 'off'}, naptime ${server.naptimeS} s`)

  log(`part 1: loading ${fmt(SIZES.BENCH_HISTORY_ROWS)} completed jobs`)
  const loadMs = await loadHistory(history, SIZES.BENCH_HISTORY_ROWS, HISTORY_QUEUES)
  const vacuumMs = { empty: await empty.vacuumAnalyze(), history: await history.vacuumAnalyze() }
  log(`  VACUUM ANALYZE + CHECKPOINT: history ${seconds(vacuumMs.history)}`)
  const size = { empty: await empty.jobsSize(), history: await history.jobsSize() }
  for (const db of [empty, history]) await warmUp(db)
  const rounds: HistoryRun['part1']['rounds'] = []
  for (let r = 0; r < SIZES.BENCH_HISTORY_ROUNDS; r++) {
    const historyFirst = r % 2 === 1
    log(`part 1: round ${r + 1} of ${SIZES.BENCH_HISTORY_ROUNDS} (${historyFirst ? 'history' : 'empty'} first)`)
    const first = await suite(historyFirst ? history : empty, true)
    const second = await suite(historyFirst ? empty : history, true)
    rounds.push({ empty: historyFirst ? second : first, history: historyFirst ? first : second, order: historyFirst ? 'history first' : 'empty first' })
  }
  const comparisons = SECTIONS.map((s) => compare(s, rounds.map((r) => r.empty), rounds.map((r) => r.history)))
  await empty.close()
  opened.splice(opened.indexOf(empty), 1)

  const part2 = SIZES.BENCH_HISTORY_PRUNE ? await pruning(history) : null
  await history.close()
  opened.splice(opened.indexOf(history), 1)

  const part3: LongDrainRun[] = []
  if (SIZES.BENCH_HISTORY_LONG_DRAIN > 0) {
    for (const spec of longDrainSpecs(server, SIZES.BENCH_HISTORY_EMULATE !== 0)) {
      log(`part 3: ${spec.label}`)
      part3.push(await longDrain(serverUrl, DRAIN_DB, spec, SIZES.BENCH_HISTORY_LONG_DRAIN, SIZES.BENCH_HISTORY_SLICE, server))
    }
  }

  const git = gitState()
  const run: HistoryRun = {
    startedAt: startedAt.toISOString(),
    seconds: (Date.now() - startedAt.getTime()) / 1000,
    machine,
    git,
    loadavg: { start: loadStart, end: loadavg() },
    sizes: SIZES,
    material: MATERIAL,
    server,
    part1: { loadMs, vacuumMs, size, rounds, comparisons },
    part2,
    part3,
    notes: [
      `Machine: ${machine.host}, ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGb} GB, Node ${machine.node}, ${machine.postgres}; ` +
        `load average ${loadStart} at the start, ${loadavg()} at the end; whole run ${seconds(Date.now() - startedAt.getTime())}.`,
      `Code: ${git.sha.slice(0, 12)}${git.dirty ? ' with uncommitted changes in src/, sql/ or migrations/' : ''}.`,
      `Noise: single figures on this VM move by about ±${MATERIAL * 100}% from run to run; a ratio within that is called noise, not a difference.`,
      'Drains are timed from the first handler start to the last completion stored (the Worker\'s \'completed\' events); ' +
        'the jobs are queued untimed through addBulk, the Worker runs in the bench\'s process.',
    ],
  }
  process.stdout.write(renderMarkdown(run))
  writeResult(run)
} finally {
  await closeAll()
}
