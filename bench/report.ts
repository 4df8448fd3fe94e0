// Renders a run as markdown: the side-by-side table, the targets of issue 6, per-op costs and each system's configuration.

import type { Sizes } from './config.js'
import type { ServerLimits } from './pgbench.js'
import type { BenchRun, SystemRun } from './run-result.js'
import type { WorkloadId, WorkloadResult } from './workloads/context.js'

type Kind = 'rate' | 'latency' | 'rss'
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
  { id: 'W4', kind: 'rss', title: () => 'W4 worker process peak RSS, MB (RSS when it started consuming)' },
  { id: 'W5', kind: 'rate', title: (s) => `W5 ${int(s.w5Adds)} dedup adds over ${int(s.w5Keys)} keys, ${s.producers} producers (adds/s, jobs created)` },
  { id: 'W6', kind: 'latency', title: () => 'W6 add → handler start, idle worker (p50 / p99 ms)' },
  { id: 'W7', kind: 'latency', title: () => 'W7 duplicate add, key held (p50 / p99 ms)' },
  { id: 'W8', kind: 'rate', title: (s) => `W8 processing with ${int(s.w8Queued)} queued (jobs/s)` },
]

const RATE_TARGET = 1.5
const LATENCY_TARGET = 2 / 3

function result(system: SystemRun | undefined, id: WorkloadId): WorkloadResult | undefined {
  return system?.workloads[id]
}

function cell(system: SystemRun, row: Row): string {
  const r = result(system, row.id)
  if (!r) return system.errors[row.id] || system.errors.open ? 'error' : '—'
  const wrong = r.correct ? '' : ` ✗ ${r.note ?? 'wrong outcome'}`
  if (row.kind === 'rss') return r.peakRssMb === undefined ? '—' : `${int(r.peakRssMb)} (at start ${int(r.startRssMb ?? Number.NaN)})`
  if (row.kind === 'latency') return `${millis(r.p50Ms ?? Number.NaN)} / ${millis(r.p99Ms ?? Number.NaN)}${wrong}`
  const created = r.created !== undefined ? ` (${int(r.created)})` : ''
  return `${int(r.perSecond ?? Number.NaN)}${created}${wrong}`
}

/** The best Postgres peer's figure (pgonce and the Redis reference excluded). */
function bestPeer(run: BenchRun, id: WorkloadId, pick: (r: WorkloadResult) => number | undefined, lowerIsBetter: boolean): number | undefined {
  const values = run.systems
    .filter((s) => s.backend === 'postgres' && s.id !== 'pgonce')
    .map((s) => result(s, id))
    .map((r) => (r ? pick(r) : undefined))
    .filter((v): v is number => v !== undefined && Number.isFinite(v))
  if (values.length === 0) return undefined
  return lowerIsBetter ? Math.min(...values) : Math.max(...values)
}

function ratioCell(run: BenchRun, row: Row): string {
  const own = result(run.systems.find((s) => s.id === 'pgonce'), row.id)
  if (!own) return '—'
  if (row.kind === 'latency') {
    const p50 = bestPeer(run, row.id, (r) => r.p50Ms, true)
    const p99 = bestPeer(run, row.id, (r) => r.p99Ms, true)
    if (p50 === undefined || p99 === undefined || own.p50Ms === undefined || own.p99Ms === undefined) return '—'
    const a = own.p50Ms / p50
    const b = own.p99Ms / p99
    return `${times(a)} / ${times(b)} ${mark(a <= LATENCY_TARGET && b <= LATENCY_TARGET)}`
  }
  if (row.kind === 'rss') {
    const best = bestPeer(run, row.id, (r) => r.peakRssMb, true)
    return best === undefined || own.peakRssMb === undefined ? '—' : times(own.peakRssMb / best)
  }
  const best = bestPeer(run, row.id, (r) => r.perSecond, false)
  if (best === undefined || own.perSecond === undefined) return '—'
  const ratio = own.perSecond / best
  return `${times(ratio)} ${mark(ratio >= RATE_TARGET && own.correct)}`
}

function limitCell(run: BenchRun, row: Row): string {
  if (!('singleInsert16' in run.limits) || row.kind !== 'rate') return ''
  const l: ServerLimits = run.limits
  const own = result(run.systems.find((s) => s.id === 'pgonce'), row.id)?.perSecond
  const of = (limit: number): string => (own === undefined ? '' : ` · pgonce ${share(own / limit)}`)
  switch (row.id) {
    case 'W1':
      return `1-row INSERT, 1 client: ${int(l.singleInsert1)}/s${of(l.singleInsert1)}`
    case 'W2':
      return `1-row INSERT, 16 clients: ${int(l.singleInsert16)}/s${of(l.singleInsert16)} (with pg_notify: ${int(l.singleInsertNotify16)}/s)`
    case 'W3':
      return `1,000-row INSERT, 1 client: ${int(l.multiInsertRows1)} rows/s${of(l.multiInsertRows1)}`
    default:
      return own === undefined ? '' : `pgonce ${share(own / l.singleInsert16)} of 1-row INSERT/s, 16 clients`
  }
}

function targetLines(run: BenchRun): string[] {
  const own = (id: WorkloadId) => result(run.systems.find((s) => s.id === 'pgonce'), id)
  const lines: string[] = []
  for (const row of ROWS.filter((r) => r.kind !== 'rss')) {
    const ratio = ratioCell(run, row)
    if (ratio === '—') continue
    const goal = row.kind === 'rate' ? `≥ ${RATE_TARGET}× the best Postgres peer` : '≤ 2/3 of the best Postgres peer (p50 / p99)'
    lines.push(`- ${row.id} ${goal}: ${ratio}`)
  }
  const w5 = own('W5')
  if (w5?.created !== undefined) lines.push(`- W5 creates exactly ${int(w5.expected ?? 0)} jobs: ${int(w5.created)} ${mark(w5.created === w5.expected)}`)
  if ('singleInsert16' in run.limits) {
    const w3 = own('W3')?.perSecond
    const w4 = own('W4')?.perSecond
    if (w3 !== undefined) lines.push(`- W3 ≥ 50% of the 1,000-row INSERT rate: ${share(w3 / run.limits.multiInsertRows1)} ${mark(w3 >= 0.5 * run.limits.multiInsertRows1)}`)
    if (w4 !== undefined) lines.push(`- W4 ≥ 25% of the 16-client 1-row INSERT TPS: ${share(w4 / run.limits.singleInsert16)} ${mark(w4 >= 0.25 * run.limits.singleInsert16)}`)
  }
  const w7 = own('W7')?.p50Ms
  if (w7 !== undefined) lines.push(`- W7 duplicate add p50 < 1 ms: ${millis(w7)} ms ${mark(w7 < 1)}`)
  return lines
}

function costCell(r: WorkloadResult | undefined): string {
  if (!r) return '—'
  const parts: string[] = []
  if (r.roundTripsPerOp !== undefined) parts.push(`${r.roundTripsPerOp.toFixed(r.roundTripsPerOp < 0.1 ? 3 : 2)} rt`)
  if (r.walBytesPerOp !== undefined) parts.push(`${int(r.walBytesPerOp)} B WAL`)
  return parts.length ? parts.join(', ') : '—'
}

const tableLine = (cells: string[]): string => `| ${cells.join(' | ')} |`

export function renderMarkdown(run: BenchRun): string {
  const systems = run.systems
  const out: string[] = []
  out.push(tableLine(['workload', ...systems.map((s) => s.label), 'pgonce ÷ best Postgres peer', 'server limit (pgbench)']))
  out.push(tableLine(Array(systems.length + 3).fill('---')))
  for (const row of ROWS) {
    out.push(tableLine([row.title(run.sizes), ...systems.map((s) => cell(s, row)), ratioCell(run, row), limitCell(run, row)]))
  }
  const m = run.machine
  out.push('', `Machine: ${m.host}, ${m.cpus} × ${m.cpuModel}, ${m.memoryGb} GB RAM, Node ${m.node}, ${m.postgres} (${m.postgresKind})` +
    `${m.redis ? `, Redis ${m.redis}` : ''}. BENCH_SCALE=${run.scale}; whole run ${Math.round(run.seconds)} s.`)
  if ('skipped' in run.limits) out.push('', `Server limit: ${run.limits.skipped}.`)
  else out.push('', `Server limit: pgbench, ${run.limits.seconds} s per figure, on a scratch table in a scratch database of the same server.`)
  out.push('', 'Targets (issue 6):', ...targetLines(run))
  out.push('', 'Configuration:')
  for (const s of systems) out.push(`- **${s.label}**: ${s.config.join('; ')}`)
  out.push('', 'Per-op cost (queries sent through node-postgres per add or job, producer and consumer side; WAL bytes per op, server-wide):', '')
  out.push(tableLine(['workload', ...systems.map((s) => s.label)]))
  out.push(tableLine(Array(systems.length + 1).fill('---')))
  for (const row of ROWS.filter((r) => r.kind !== 'rss')) {
    out.push(tableLine([row.id, ...systems.map((s) => costCell(result(s, row.id)))]))
  }
  const failures = systems.flatMap((s) => Object.entries(s.errors).map(([w, e]) => `- ${s.label} ${w}: ${String(e).split('\n')[0]}`))
  if (failures.length) out.push('', 'Errors:', ...failures)
  if (run.notes.length) out.push('', 'Notes:', ...run.notes.map((n) => `- ${n}`))
  return out.join('\n')
}
