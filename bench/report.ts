// Renders a run as markdown: each system at its best configuration per workload (footnote letter per cell), one row
// per maintenance mode where the modes differ materially, the physical limits measured from Node, ratios and targets.

import type { Sizes } from './config.js'
import { LIMIT_LABEL, LIMIT_OF, type LimitResult } from './limits.js'
import type { BenchRun, ConfigRun, PassRun, SystemRun } from './run-result.js'
import { type PairedShare, type PairedWorkload, pairedRatios, pairedShare } from './paired.js'
import { type PeerPairedShare, peerFiguresOf, peerRatio, peerRatios } from './paired-peer.js'
import { CLOSE_CONFIGS, type DrainPairedShare, type DrainWorkload, type RoundsCandidate, drainLoopRatios, drainLoopShare, drainPeerRatio, drainPeerRatios } from './paired-drains.js'
import { percentile } from './measure.js'
import { MODE_LABEL, type Mode, type WorkloadId, type WorkloadResult } from './workloads/context.js'

export type Kind = 'rate' | 'latency'
interface Row {
  id: WorkloadId
  kind: Kind
  title: (s: Sizes) => string
}

const int = (n: number): string => Math.round(n).toLocaleString('en-US')
const millis = (n: number): string => (n < 10 ? n.toFixed(2) : n.toFixed(1))
const share = (n: number): string => `${(n * 100).toFixed(n < 0.1 ? 1 : 0)}%`
const times = (n: number): string => `${n.toFixed(2)}×`
const mark = (ok: boolean): string => (ok ? '✓' : '✗')

const ROWS: Row[] = [
  { id: 'W1', kind: 'rate', title: (s) => `W1 ${int(s.w1Adds)} sequential adds (adds/s)` },
  { id: 'W2', kind: 'rate', title: (s) => `W2 ${int(s.w2Adds)} adds, ${s.producers} producers (adds/s)` },
  { id: 'W3', kind: 'rate', title: (s) => `W3 ${int(s.w3Jobs)} jobs in bulk batches of ${int(s.bulkBatch)} (jobs/s)` },
  { id: 'W4', kind: 'rate', title: (s) => `W4 ${int(s.w4Jobs)} queued no-op jobs, concurrency 16 (jobs/s)` },
  { id: 'W5', kind: 'rate', title: (s) => `W5 ${int(s.w5Adds)} dedup adds over ${int(s.w5Keys)} keys, ${s.producers} producers (adds/s, jobs created)` },
  { id: 'W6', kind: 'latency', title: (s) => `W6 add → handler start, after ${s.w6PauseMs} ms idle (p50 / p99 ms)` },
  { id: 'W7', kind: 'latency', title: () => 'W7 duplicate add, key held (p50 / p99 ms)' },
  { id: 'W8', kind: 'rate', title: (s) => `W8 processing with ${int(s.w8Queued)} queued (jobs/s over the first ${int(s.w8Window)})` },
]

export { MODE_LABEL }

/** The figure a workload is ranked by: throughput (higher is better) or p50 latency (lower is better). */
function figure(kind: Kind, r: WorkloadResult | LimitResult | undefined): number | undefined {
  const v = kind === 'rate' ? r?.perSecond : r?.p50Ms
  return v !== undefined && Number.isFinite(v) ? v : undefined
}

const better = (kind: Kind, a: number, b: number): boolean => (kind === 'rate' ? a > b : a < b)

/** Whether workload `id` is ranked by throughput or by p50 latency. */
export const kindOf = (id: WorkloadId): Kind => ROWS.find((r) => r.id === id)?.kind ?? 'rate'

/** The figure workload `id` is ranked by, if `r` has a finite one. */
export const figureOf = (id: WorkloadId, r: WorkloadResult | undefined): number | undefined => figure(kindOf(id), r)

export interface Best {
  letter: string
  result: WorkloadResult
}

/** `system`'s best configuration for workload `row` in `mode`: correct outcomes first, then the figure. */
export function bestOf(system: SystemRun, id: WorkloadId, mode: Mode): Best | undefined {
  const kind = kindOf(id)
  let best: Best | undefined
  for (const pass of system.passes.filter((p: PassRun) => p.mode === mode)) {
    const result = pass.workloads[id]
    const v = figure(kind, result)
    if (!result || v === undefined) continue
    const letter = system.configs.find((c) => c.key === pass.config)?.letter ?? '?'
    const current = best ? figure(kind, best.result) : undefined
    if (!best || current === undefined || (result.correct && !best.result.correct) ||
      (result.correct === best.result.correct && better(kind, v, current))) best = { letter, result }
  }
  return best
}

/** Fills `system.best` (kept in the JSON) from its passes. */
export function recordBest(system: SystemRun, modes: readonly Mode[]): void {
  for (const mode of modes) {
    const byWorkload: Partial<Record<WorkloadId, string>> = {}
    for (const row of ROWS) {
      const best = bestOf(system, row.id, mode)
      if (best) byWorkload[row.id] = best.letter
    }
    system.best[mode] = byWorkload
  }
}

/**
 * Every configuration of `systems` whose correct pass at workload `id` in `mode` came within `factor` of the best
 * such pass among them (the paired drains run each of them: bench/paired-drains.ts).
 */
export function closePassConfigs(systems: readonly SystemRun[], id: WorkloadId, mode: Mode, factor: number): { system: SystemRun; config: ConfigRun }[] {
  const kind = kindOf(id)
  const ran = systems.flatMap((system) => system.passes
    .filter((p) => p.mode === mode && p.workloads[id]?.correct)
    .map((p) => ({ system, config: system.configs.find((c) => c.key === p.config), value: figure(kind, p.workloads[id]) })))
    .filter((r): r is { system: SystemRun; config: ConfigRun; value: number } => r.config !== undefined && r.value !== undefined)
  const best = ran.reduce<number | undefined>((b, r) => (b === undefined || better(kind, r.value, b) ? r.value : b), undefined)
  if (best === undefined) return []
  const close = (v: number): boolean => (kind === 'rate' ? v * factor >= best : v <= best * factor)
  return ran.filter((r) => close(r.value)).map(({ system, config }) => ({ system, config }))
}

/** The Postgres peers among `systems` (not pgonce, its baseline, or the Redis reference). */
export const peersOf = (systems: readonly SystemRun[]): SystemRun[] => systems.filter(isPeer)

const own = (run: BenchRun): SystemRun | undefined => run.systems.find((s) => s.id === 'pgonce')
const ownBaseline = (run: BenchRun): SystemRun | undefined => run.systems.find((s) => s.id === 'pgonce-baseline')
const isPeer = (s: SystemRun): boolean => s.backend === 'postgres' && s.id !== 'pgonce' && s.id !== 'pgonce-baseline'

/** A limit as measured before the passes, and after them where it was measured again (see BenchRun.limitsAfter). */
function limitMeasures(run: BenchRun, id: WorkloadId, mode: Mode): { before?: LimitResult; after?: LimitResult } {
  const limit = LIMIT_OF[id]
  if (!limit) return {}
  return {
    before: run.limits.find((p) => p.mode === mode)?.results[limit],
    after: run.limitsAfter?.find((p) => p.mode === mode)?.results[limit],
  }
}

/** The limit a share is taken against: the mean of the measures before and after the passes, or the one there is. */
function limitOf(run: BenchRun, id: WorkloadId, mode: Mode): LimitResult | undefined {
  const { before, after } = limitMeasures(run, id, mode)
  if (!before || !after) return before ?? after
  const mean = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? undefined : (a + b) / 2)
  return { ...before, perSecond: mean(before.perSecond, after.perSecond), p50Ms: mean(before.p50Ms, after.p50Ms), p99Ms: mean(before.p99Ms, after.p99Ms) }
}

/** The best Postgres peer at its best (pgonce, its baseline and the Redis reference excluded). */
function bestPeer(run: BenchRun, row: Row, mode: Mode): (Best & { label: string; value: number; p99?: number }) | undefined {
  const found = bestPeerRun(run.systems, row.id, mode)
  return found && { ...found.best, label: found.system.label, value: figure(row.kind, found.best.result) as number }
}

/** The Postgres peer that was best at `id` in `mode`, and its best pass there. */
export function bestPeerRun(systems: SystemRun[], id: WorkloadId, mode: Mode): { system: SystemRun; best: Best } | undefined {
  const kind = kindOf(id)
  let found: { system: SystemRun; best: Best; value: number } | undefined
  for (const s of systems.filter(isPeer)) {
    const b = bestOf(s, id, mode)
    const v = figure(kind, b?.result)
    if (b && v !== undefined && (!found || better(kind, v, found.value))) found = { system: s, best: b, value: v }
  }
  return found
}

function cell(system: SystemRun, row: Row, mode: Mode): string {
  if (system.backend === 'redis' && mode === 'analysed') return 'n/a (no tables)'
  const best = bestOf(system, row.id, mode)
  if (!best) {
    const failed = system.passes.some((p) => p.mode === mode && (p.errors[row.id] || p.errors.open))
    return failed ? 'error' : '—'
  }
  const r = best.result
  const wrong = r.correct ? '' : ` ✗ ${r.note ?? 'wrong outcome'}`
  const tag = ` [${best.letter}]`
  if (row.kind === 'latency') return `${millis(r.p50Ms ?? Number.NaN)} / ${millis(r.p99Ms ?? Number.NaN)}${tag}${wrong}`
  const created = r.created !== undefined ? ` (${int(r.created)})` : ''
  return `${int(r.perSecond ?? Number.NaN)}${created}${tag}${wrong}`
}

function limitCell(run: BenchRun, row: Row, mode: Mode): string {
  const id = LIMIT_OF[row.id]
  if (!id) return '—'
  const l = limitOf(run, row.id, mode)
  if (!l) return run.limits.length ? 'error' : '—'
  const shown = (r: LimitResult) => (row.kind === 'latency' ? `${millis(r.p50Ms ?? Number.NaN)} / ${millis(r.p99Ms ?? Number.NaN)}` : int(r.perSecond ?? Number.NaN))
  const { before, after } = limitMeasures(run, row.id, mode)
  return before && after ? `${shown(l)} (${shown(before)} → ${shown(after)})` : shown(l)
}

interface Ratios {
  /** pgonce ÷ best peer (rate) or pgonce p50 ÷ best peer p50 (latency). */
  peer?: number
  peerLetter?: string
  peerLabel?: string
  /** pgonce ÷ limit (rate) or pgonce p50 ÷ limit p50 (latency). */
  limit?: number
  baseline?: number
}

function ratios(run: BenchRun, row: Row, mode: Mode): Ratios {
  const mine = figure(row.kind, own(run) ? bestOf(own(run) as SystemRun, row.id, mode)?.result : undefined)
  if (mine === undefined) return {}
  const out: Ratios = {}
  const peer = bestPeer(run, row, mode)
  if (peer) Object.assign(out, { peer: mine / peer.value, peerLetter: peer.letter, peerLabel: peer.label })
  const limit = figure(row.kind, limitOf(run, row.id, mode))
  if (limit !== undefined) out.limit = mine / limit
  const base = ownBaseline(run)
  const theirs = base ? figure(row.kind, bestOf(base, row.id, mode)?.result) : undefined
  if (theirs !== undefined) out.baseline = mine / theirs
  return out
}

/** One condition of a target: its measured value (undefined when a side of it was not run) and the goal. */
interface Part {
  what: 'peer' | 'limit' | 'outcome' | 'paired' | 'paired-peer' | 'drain-peer' | 'drain-loop'
  ok: boolean | undefined
}

interface Target {
  id: WorkloadId
  text: string
  parts: (r: Ratios, run: BenchRun, mode: Mode) => Part[]
}

const atLeast = (v: number | undefined, goal: number): boolean | undefined => (v === undefined ? undefined : v >= goal)
const atMost = (v: number | undefined, goal: number): boolean | undefined => (v === undefined ? undefined : v <= goal)
const peerAtLeast = (r: Ratios, goal: number): Part => ({ what: 'peer', ok: atLeast(r.peer, goal) })
const limitAtLeast = (r: Ratios, goal: number): Part => ({ what: 'limit', ok: atLeast(r.limit, goal) })

/** `workload`'s pgonce ÷ limit alternated in rounds (bench/paired.ts), where the run measured it. */
function pairedRatio(run: BenchRun, workload: PairedWorkload, mode: Mode): number | undefined {
  const p = run.paired?.find((x) => x.workload === workload && x.mode === mode)
  return p && p.pgonce.length > 0 ? pairedShare(p) : undefined
}

/** W5 or W6 alternated with its best peer in rounds (bench/paired-peer.ts), where the run measured it. */
function pairedPeerOf(run: BenchRun, workload: WorkloadId, mode: Mode): PeerPairedShare | undefined {
  return run.pairedPeers?.find((p) => p.workload === workload && p.mode === mode && p.pgonce.length > 0)
}

/** The peer part of a target, judged on the paired rounds where the run has them, else on the table's ratio. */
function peerPart(r: Ratios, run: BenchRun, mode: Mode, workload: WorkloadId, ok: (ratio: number | undefined) => boolean | undefined): Part {
  const paired = pairedPeerOf(run, workload, mode)
  return paired ? { what: 'paired-peer', ok: ok(peerRatio(paired)) } : { what: 'peer', ok: ok(r.peer) }
}

/** The limit part of a target, judged on the paired rounds where the run has them, else on the table's ratio. */
function limitPart(r: Ratios, run: BenchRun, mode: Mode, workload: PairedWorkload, ok: (ratio: number | undefined) => boolean | undefined): Part {
  const paired = pairedRatio(run, workload, mode)
  return paired === undefined ? { what: 'limit', ok: ok(r.limit) } : { what: 'paired', ok: ok(paired) }
}

/** W4's or W8's drain paired with its best peer and the loop in rounds (bench/paired-drains.ts), where the run measured it. */
function pairedDrainOf(run: BenchRun, workload: WorkloadId, mode: Mode): DrainPairedShare | undefined {
  return run.pairedDrains?.find((p) => p.workload === workload && p.mode === mode && p.pgonce.length > 0)
}

/** A drain's target: ≥ 1.5× the best peer and ≥ 60% of the loop, each judged on the paired rounds where the run has them. */
function drainParts(r: Ratios, run: BenchRun, mode: Mode, workload: DrainWorkload): Part[] {
  const paired = pairedDrainOf(run, workload, mode)
  if (!paired) return [peerAtLeast(r, 1.5), limitAtLeast(r, 0.6)]
  return [{ what: 'drain-peer', ok: atLeast(drainPeerRatio(paired), 1.5) }, { what: 'drain-loop', ok: atLeast(drainLoopShare(paired), 0.6) }]
}

const TARGETS: Target[] = [
  {
    id: 'W1',
    text: 'W1 ≥ 90% of the bare 1-row INSERT from Node (judged on the paired rounds where measured)',
    parts: (r, run, mode) => [limitPart(r, run, mode, 'W1', (v) => atLeast(v, 0.9))],
  },
  {
    id: 'W2',
    text: 'W2 ≥ 50% of the 16-connection bare INSERT (judged on the paired rounds where measured)',
    parts: (r, run, mode) => [limitPart(r, run, mode, 'W2', (v) => atLeast(v, 0.5))],
  },
  {
    id: 'W3',
    text: 'W3 ≥ 70% of the bare 1,000-row INSERT (judged on the paired rounds where measured)',
    parts: (r, run, mode) => [limitPart(r, run, mode, 'W3', (v) => atLeast(v, 0.7))],
  },
  {
    id: 'W4',
    text: 'W4 ≥ 1.5× the best peer and ≥ 60% of the claim-and-delete loop (judged on the paired rounds where measured)',
    parts: (r, run, mode) => drainParts(r, run, mode, 'W4'),
  },
  {
    id: 'W5',
    text: 'W5 ≥ 1.5× the best peer and ≥ 50% of the 16-connection bare INSERT (each judged on the paired rounds where measured), one job per key',
    parts: (r, run, mode) => {
      const w5 = own(run) ? bestOf(own(run) as SystemRun, 'W5', mode)?.result : undefined
      return [peerPart(r, run, mode, 'W5', (v) => atLeast(v, 1.5)), limitPart(r, run, mode, 'W5', (v) => atLeast(v, 0.5)), { what: 'outcome', ok: w5?.correct }]
    },
  },
  {
    id: 'W6',
    text: 'W6 p50 ≤ 0.8× the best peer at its best and ≤ 1.3× the bare INSERT + pg_notify (each judged on the paired rounds where measured)',
    parts: (r, run, mode) => [peerPart(r, run, mode, 'W6', (v) => atMost(v, 0.8)), limitPart(r, run, mode, 'W6', (v) => atMost(v, 1.3))],
  },
  {
    id: 'W8',
    text: 'W8 ≥ 1.5× the best peer and ≥ 60% of the claim-and-delete loop (judged on the paired rounds where measured)',
    parts: (r, run, mode) => drainParts(r, run, mode, 'W8'),
  },
]

/** ✓ when every measured part passes, ✗ when one fails, undefined when nothing was measured. */
function verdict(parts: Part[]): boolean | undefined {
  const measured = parts.filter((p) => p.ok !== undefined)
  return measured.length ? measured.every((p) => p.ok) : undefined
}

function targetOf(run: BenchRun, row: Row, mode: Mode): boolean | undefined {
  const target = TARGETS.find((t) => t.id === row.id)
  return target ? verdict(target.parts(ratios(run, row, mode), run, mode)) : undefined
}

/** Whether `row` is worth a row per mode: some figure moved by more than `run.material`, or a target flipped. */
function material(run: BenchRun, row: Row): boolean {
  if (run.modes.length < 2) return false
  const [a, b] = run.modes as [Mode, Mode]
  const moved = (x: number | undefined, y: number | undefined): boolean =>
    x !== undefined && y !== undefined && Math.abs(x - y) / Math.min(x, y) > run.material
  for (const s of run.systems) {
    if (moved(figure(row.kind, bestOf(s, row.id, a)?.result), figure(row.kind, bestOf(s, row.id, b)?.result))) return true
  }
  if (moved(figure(row.kind, limitOf(run, row.id, a)), figure(row.kind, limitOf(run, row.id, b)))) return true
  return targetOf(run, row, a) !== targetOf(run, row, b)
}

function ratioText(r: Ratios, row: Row): { peer: string; limit: string; baseline: string } {
  const peer = r.peer === undefined ? '—' : `${times(r.peer)}${r.peerLetter ? ` [${r.peerLetter}]` : ''}`
  const limit = r.limit === undefined ? '—' : row.kind === 'latency' ? times(r.limit) : share(r.limit)
  return { peer, limit, baseline: r.baseline === undefined ? '—' : times(r.baseline) }
}

function pgbenchCell(run: BenchRun, row: Row): string {
  if ('skipped' in run.pgbench) return ''
  const l = run.pgbench
  switch (row.id) {
    case 'W1':
      return `1-row INSERT, 1 client: ${int(l.singleInsert1)}/s`
    case 'W2':
    case 'W5':
      return `1-row INSERT, 16 clients: ${int(l.singleInsert16)}/s (with pg_notify: ${int(l.singleInsertNotify16)}/s)`
    case 'W3':
      return `1,000-row INSERT, 1 client: ${int(l.multiInsertRows1)} rows/s`
    default:
      return ''
  }
}

function costCell(r: WorkloadResult | undefined): string {
  if (!r) return '—'
  const parts: string[] = []
  if (r.roundTripsPerOp !== undefined) parts.push(`${r.roundTripsPerOp.toFixed(r.roundTripsPerOp < 0.1 ? 3 : 2)} rt`)
  if (r.walBytesPerOp !== undefined) parts.push(`${int(r.walBytesPerOp)} B WAL`)
  return parts.length ? parts.join(', ') : '—'
}

const tableLine = (cells: string[]): string => `| ${cells.join(' | ')} |`

function targetLines(run: BenchRun): string[] {
  const lines: string[] = []
  for (const t of TARGETS) {
    const row = ROWS.find((r) => r.id === t.id) as Row
    const perMode = run.modes.map((mode) => {
      const r = ratios(run, row, mode)
      const parts = t.parts(r, run, mode)
      const ok = verdict(parts)
      if (ok === undefined) return null
      const { limit, peer } = ratioText(r, row)
      const inTable = `the table's best peer: ${peer}`
      const shown = parts.map((p) => {
        if (p.what === 'peer') return p.ok === undefined ? 'no peer run' : `${times(r.peer as number)} the best peer [${r.peerLetter}]`
        if (p.what === 'limit') return p.ok === undefined ? 'no limit measured' : row.kind === 'latency' ? `${limit} the limit` : `${limit} of the limit`
        if (p.what === 'paired-peer') {
          const pp = pairedPeerOf(run, row.id, mode) as PeerPairedShare
          return `${times(peerRatio(pp))} ${pp.peer.label} [${pp.peer.letter}], paired in rounds (${inTable})`
        }
        if (p.what === 'drain-peer' || p.what === 'drain-loop') {
          const d = pairedDrainOf(run, row.id, mode) as DrainPairedShare
          return p.what === 'drain-peer'
            ? `${times(drainPeerRatio(d))} ${d.peer.label} [${d.peer.letter}], paired in rounds (${inTable})`
            : `${share(drainLoopShare(d))} of the loop, paired in rounds (${limit} in the table)`
        }
        if (p.what === 'paired') {
          const v = pairedRatio(run, row.id as PairedWorkload, mode) as number
          return `${row.kind === 'latency' ? `${times(v)} the limit` : `${share(v)} of the limit`}, paired in rounds (${limit} in the table)`
        }
        return p.ok === undefined ? '' : p.ok ? 'one job per key' : 'wrong job count'
      }).filter(Boolean)
      return `${MODE_LABEL[mode]}: ${shown.join(', ')} ${mark(ok)}`
    }).filter((p): p is string => p !== null)
    if (perMode.length) lines.push(`- ${t.text}: ${perMode.join('; ')}`)
  }
  return lines
}

/** The lowest and highest of `values`, each shown by `show`. */
const range = (values: number[], show: (v: number) => string): string => `${show(Math.min(...values))}–${show(Math.max(...values))}`

/** The workloads alternated with their limits in rounds, per mode: the ratios their targets are judged on. */
function pairedLines(paired: PairedShare[]): string[] {
  const first = paired[0] as PairedShare
  return [
    `Paired with the limit (bench/paired.ts, after the passes: pgonce and the workload's limit statement alternated in ${first.pgonce.length} ` +
      'rounds in one database, the limit first in even rounds; W1–W5 compare jobs added per second, W6 the p50 of each round\'s samples; ' +
      'geometric mean of the rounds\' ratios, their range, and the medians of the rounds\' figures):',
    ...paired.map((p) => {
      const r = pairedRatios(p)
      const w6 = p.workload === 'W6'
      const show = w6 ? times : share
      const figures = w6 ? `p50 ${millis(percentile(p.pgonce, 50))} against ${millis(percentile(p.limit, 50))} ms`
        : `${int(percentile(p.pgonce, 50))} against ${int(percentile(p.limit, 50))} jobs/s`
      return `- ${p.workload}, ${MODE_LABEL[p.mode]}, rounds of ${int(p.perRound)}: ${show(pairedShare(p))} ` +
        `(${range(r, show)}), ${figures}`
    }),
  ]
}

/** W5 and W6 alternated with the best peer in rounds, per mode: the ratios their peer parts are judged on. */
function pairedPeerLines(paired: PeerPairedShare[]): string[] {
  return [
    'Paired with the best peer (bench/paired-peer.ts, after the passes: pgonce and the peer that was best at the workload in that ' +
      'mode, in that configuration, each in a fresh database of its own, alternated in rounds, the peer first in even ' +
      'rounds; W5 adds per second, W6 the p50 of each round\'s samples; geometric mean of the rounds\' ratios, their range, and the medians):',
    ...paired.map((p) => {
      const r = peerRatios(p)
      const [ours, theirs] = [percentile(p.pgonce, 50), percentile(peerFiguresOf(p), 50)]
      const figures = p.workload === 'W6' ? `p50 ${millis(ours)} against ${millis(theirs)} ms` : `${int(ours)} against ${int(theirs)} adds/s`
      return `- ${p.workload}, ${MODE_LABEL[p.mode]}, against ${p.peer.label} [${p.peer.letter}], rounds of ${int(p.perRound)}: ${times(peerRatio(p))} ` +
        `(${range(r, times)}), ${figures}`
    }),
  ]
}

/** ` (of [a] 31,000 / [b] 34,000)`: each configuration's median over the rounds, when a side ran more than one. */
function candidatesNote<C>(candidates: readonly RoundsCandidate<C>[] | undefined, letter: (c: C) => string): string {
  if (!candidates || candidates.length < 2) return ''
  return ` (of ${candidates.map((c) => `[${letter(c.config)}] ${int(percentile(c.rates, 50))}`).join(' / ')})`
}

/** W4 and W8 paired with the best peer and the loop, per mode: the ratios their targets are judged on. */
function pairedDrainLines(paired: DrainPairedShare[]): string[] {
  const chosenInRounds = paired.some((p) => p.oursCandidates !== undefined)
  return [
    `The drains paired (bench/paired-drains.ts, after the passes: pgonce's drain and the peer's and the claim-and-delete loop, each exactly as in its pass or probe, ` +
      `one after another in ${paired[0]?.pgonce.length} rounds, the order rotating; ` +
      (chosenInRounds
        ? `each side ran every configuration whose pass came within ${CLOSE_CONFIGS}× of its best and is represented by the one with the best geometric mean over the rounds ` +
          '(the medians of each in brackets); '
        : 'each side in its configuration that was best at the workload in that mode\'s passes; ') +
      'geometric mean of the rounds\' ratios, their range, and the medians of the rounds\' jobs/s):',
    ...paired.map((p) => {
      const [peer, loop] = [drainPeerRatios(p), drainLoopRatios(p)]
      const ours = p.ours ? `pgonce [${p.ours.letter}]${candidatesNote(p.oursCandidates, (c) => c.letter)} ` : ''
      return `- ${p.workload}, ${MODE_LABEL[p.mode]}, ${ours}against ${p.peer.label} [${p.peer.letter}]${candidatesNote(p.peerCandidates, (c) => c.letter)}: ` +
        `${times(drainPeerRatio(p))} (${range(peer, times)}), ${share(drainLoopShare(p))} of the loop (${range(loop, share)}); ` +
        `${int(percentile(p.pgonce, 50))} against ${int(percentile(p.peerRates, 50))} and ${int(percentile(p.loop, 50))} jobs/s`
    }),
  ]
}

export function renderMarkdown(run: BenchRun): string {
  const systems = run.systems
  const base = ownBaseline(run)
  const out: string[] = []
  const header = ['workload', ...systems.map((s) => s.label), 'physical limit (Node, pgonce.jobs)', 'pgonce ÷ best Postgres peer',
    'pgonce ÷ limit', ...(base ? [`pgonce ÷ ${base.label}`] : []), 'pgbench, scratch table (reference)']
  out.push(tableLine(header), tableLine(header.map(() => '---')))
  const collapsed: WorkloadId[] = []
  for (const row of ROWS) {
    if (!systems.some((s) => s.passes.some((p) => p.workloads[row.id] || p.errors[row.id]))) continue
    const split = material(run, row)
    if (!split && run.modes.length > 1) collapsed.push(row.id)
    const modes = split ? run.modes : run.modes.slice(0, 1)
    for (const mode of modes) {
      const r = ratioText(ratios(run, row, mode), row)
      const title = split ? `${row.title(run.sizes)} — ${MODE_LABEL[mode]}` : row.title(run.sizes)
      out.push(tableLine([title, ...systems.map((s) => cell(s, row, mode)), limitCell(run, row, mode), r.peer, r.limit,
        ...(base ? [r.baseline] : []), pgbenchCell(run, row)]))
    }
  }
  const rss = systems.map((s) => {
    const r = bestOf(s, 'W4', run.modes[0] as Mode)?.result
    return r?.peakRssMb === undefined ? '—' : `${int(r.peakRssMb)} (at start ${int(r.startRssMb ?? Number.NaN)})`
  })
  if (rss.some((c) => c !== '—')) out.push(tableLine(['W4 worker process peak RSS, MB', ...rss, '', '', '', ...(base ? [''] : []), '']))

  const first = run.modes[0] as Mode
  out.push('')
  if (collapsed.length) {
    out.push(`${collapsed.join(', ')}: one row, ${MODE_LABEL[first]}; every system's figure and the limit were within ${share(run.material)} of ` +
      `their figures ${MODE_LABEL[run.modes[1] as Mode]}, with the same target outcome (both are in the JSON). Other workloads: a row per mode.`)
  } else if (run.modes.length === 1) {
    out.push(`Every row: ${MODE_LABEL[first]} only (BENCH_MODES).`)
  }
  const shownRows = ROWS.filter((row) => systems.some((s) => s.passes.some((p) => p.workloads[row.id] || p.errors[row.id])))
  const limitRows = shownRows.filter((row) => LIMIT_OF[row.id] && run.limits.some((p) => p.results[LIMIT_OF[row.id] as keyof typeof p.results]))
  if (limitRows.length) {
    out.push('', 'Physical limit, measured in this run from Node on pgonce\'s jobs table (queue, name and data inserted, the rest left to the column defaults; prepared statements)' +
      `${run.limitsAfter?.length ? '; the insert limits before the passes and again after them (before → after in the cell), each share against their mean' : ''}:`)
    for (const row of limitRows) out.push(`- ${row.id}: ${LIMIT_LABEL[LIMIT_OF[row.id] as keyof typeof LIMIT_LABEL]}`)
  }
  if (run.paired?.length) out.push('', ...pairedLines(run.paired))
  if (run.pairedPeers?.length) out.push('', ...pairedPeerLines(run.pairedPeers))
  if (run.pairedDrains?.length) out.push('', ...pairedDrainLines(run.pairedDrains))
  out.push('', 'Configurations (the letter in each cell is the configuration that gave that figure, the best of those the system ran for that workload):')
  for (const s of systems) {
    out.push(`- **${s.label}**: ${s.common.join('; ')}`)
    for (const c of s.configs) {
      out.push(`  - [${c.letter}] ${c.purpose}: ${c.lines.join('; ')} — ran ${c.workloads.join(', ')}`)
    }
  }
  out.push('', 'Targets (per mode):', ...targetLines(run))

  const m = run.machine
  out.push('', `Machine: ${m.host}, ${m.cpus} × ${m.cpuModel}, ${m.memoryGb} GB RAM, Node ${m.node}, ${m.postgres} (${m.postgresKind})` +
    `${m.redis ? `, Redis ${m.redis}` : ''}. BENCH_SCALE=${run.scale}; whole run ${Math.round(run.seconds)} s.`)
  if (run.baseline) {
    out.push('', `Baseline: \`${run.baseline.ref}\` = ${run.baseline.sha}, checked out as a git worktree, run on this checkout's node_modules` +
      `${run.baseline.lockfileDiffers ? ' (its package-lock.json differs)' : ''}, in a database of its own.`)
  }
  const limitNotes = run.limits.flatMap((p) => Object.entries(p.results)
    .filter(([, r]) => r?.note)
    .map(([id, r]) => `- ${id} (${MODE_LABEL[p.mode]}): ${r?.note}`))
  if (limitNotes.length) out.push('', 'Physical-limit probes:', ...limitNotes)
  if ('skipped' in run.pgbench) out.push('', `pgbench reference: ${run.pgbench.skipped}.`)
  else out.push('', `pgbench reference: ${run.pgbench.seconds} s per figure, on a 3-column scratch table in a scratch database of the same server.`)

  out.push('', `Per-op cost (${MODE_LABEL[first]}, the configuration shown above; queries sent through node-postgres per add or job, producer and consumer side; WAL bytes per op, server-wide):`, '')
  out.push(tableLine(['workload', ...systems.map((s) => s.label)]))
  out.push(tableLine(Array(systems.length + 1).fill('---')))
  for (const row of ROWS) {
    if (!systems.some((s) => bestOf(s, row.id, first))) continue
    out.push(tableLine([row.id, ...systems.map((s) => costCell(bestOf(s, row.id, first)?.result))]))
  }
  const failures = [
    ...systems.flatMap((s) => s.passes.flatMap((p) => Object.entries(p.errors).map(([w, e]) =>
      `- ${s.label} [${s.configs.find((c) => c.key === p.config)?.letter}] ${MODE_LABEL[p.mode]} ${w}: ${String(e).split('\n')[0]}`))),
    ...run.limits.flatMap((p) => Object.entries(p.errors).map(([id, e]) => `- limit ${id} ${MODE_LABEL[p.mode]}: ${String(e).split('\n')[0]}`)),
  ]
  if (failures.length) out.push('', 'Errors:', ...failures)
  if (run.notes.length) out.push('', 'Notes:', ...run.notes.map((n) => `- ${n}`))
  return out.join('\n')
}
