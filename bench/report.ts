// Renders a run as one markdown table: each system at its best configuration per workload and mode (that
// configuration's letter in the cell), the physical limit, and pgonce's ratios to the best peer, the limit and the
// baseline from the paired rounds; then the configurations behind the letters, the limits and the machine.

import { MODE_LABEL, type Mode, type Sizes } from './config.js'
import { LIMIT_LABEL } from './limits.js'
import { percentile } from './measure.js'
import type { BenchRun, SystemRun } from './results.js'
import { type Entrant, type RoundsResult, better, valueOf } from './rounds.js'
import { WORKLOAD_IDS, type WorkloadId } from './systems/system.js'
import { KIND } from './workloads/timed.js'
import type { WorkloadResult } from './workloads/context.js'

const int = (n: number): string => Math.round(n).toLocaleString('en-US')
const millis = (n: number): string => (n < 10 ? n.toFixed(2) : n.toFixed(1))
const row = (cells: string[]): string => `| ${cells.join(' | ')} |`

function title(id: WorkloadId, s: Sizes): string {
  const titles: Record<WorkloadId, string> = {
    W1: `W1 ${int(s.w1Adds)} sequential adds (adds/s)`,
    W2: `W2 ${int(s.w2Adds)} adds, ${s.producers} producers (adds/s)`,
    W3: `W3 ${int(s.w3Jobs)} jobs in batches of ${int(s.bulkBatch)} (jobs/s)`,
    W4: `W4 ${int(s.w4Jobs)} queued no-op jobs, concurrency 16 (jobs/s)`,
    W4B: `W4B ${int(s.w4Jobs)} queued no-op jobs, batch handler of 100 (jobs/s)`,
    W5: `W5 ${int(s.w5Adds)} dedup adds over ${int(s.w5Adds / 10)} keys, ${s.producers} producers (adds/s)`,
    W6: `W6 add → handler start after ${s.w6PauseMs} ms idle (p50 / p99 ms)`,
    W7: 'W7 duplicate add, key held (p50 / p99 ms)',
    W8: `W8 first ${int(s.w8Window)} of ${int(s.w8Queued)} queued (jobs/s)`,
  }
  return titles[id]
}

/** `system`'s best pass at `id` in `mode` (a correct outcome first), with its configuration's letter. */
function bestPass(
  system: SystemRun,
  id: WorkloadId,
  mode: Mode,
): { letter: string; result: WorkloadResult } | undefined {
  let best: { letter: string; result: WorkloadResult; value: number } | undefined
  for (const pass of system.passes.filter((p) => p.mode === mode)) {
    const result = pass.workloads[id]
    const value = valueOf(id, result)
    if (!result || value === undefined) continue
    if (
      !best ||
      (result.correct && !best.result.correct) ||
      (result.correct === best.result.correct && better(id, value, best.value))
    ) {
      best = { letter: system.configs.find((c) => c.key === pass.config)?.letter ?? '?', result, value }
    }
  }
  return best
}

function cell(system: SystemRun, id: WorkloadId, mode: Mode): string {
  if (system.backend === 'redis' && mode === 'analysed') return 'n/a'
  const best = bestPass(system, id, mode)
  if (!best) return system.passes.some((p) => p.mode === mode && (p.errors[id] || p.errors.open)) ? 'error' : '—'
  const r = best.result
  const figure =
    KIND[id] === 'latency'
      ? `${millis(r.p50Ms ?? Number.NaN)} / ${millis(r.p99Ms ?? Number.NaN)}`
      : int(r.perSecond ?? Number.NaN)
  return `${figure} [${best.letter}]${r.correct ? '' : ` ✗ ${r.note ?? 'wrong outcome'}`}`
}

const geomean = (xs: number[]): number => Math.exp(xs.reduce((sum, x) => sum + Math.log(x), 0) / xs.length)
type Entry = RoundsResult['entrants'][number]

/** Among `entries`, the one with the best geometric mean over the rounds. */
function bestEntry(id: WorkloadId, entries: Entry[]): Entry | undefined {
  return entries.reduce<Entry | undefined>(
    (b, e) => (!b || better(id, geomean(e.figures), geomean(b.figures)) ? e : b),
    undefined,
  )
}

/** pgonce ÷ the best of `which` in the rounds: geometric mean of the rounds' ratios, their range, the other side's letter. */
function ratioCell(r: RoundsResult | undefined, which: (e: Entrant) => boolean): string {
  if (!r) return '—'
  const ours = bestEntry(
    r.workload,
    r.entrants.filter((e) => e.id === 'pgonce'),
  )
  const theirs = bestEntry(r.workload, r.entrants.filter(which))
  if (!ours || !theirs) return '—'
  const ratios = ours.figures.map((v, i) => v / (theirs.figures[i] as number))
  const x = (v: number) => `${v.toFixed(2)}×`
  return `${x(geomean(ratios))} (${x(Math.min(...ratios))}–${x(Math.max(...ratios))})${theirs.letter ? ` [${theirs.letter}]` : ''}`
}

function limitCell(r: RoundsResult | undefined): string {
  const limit = r?.entrants.find((e) => e.id === 'limit')
  if (!r || !limit) return '—'
  const median = percentile(limit.figures, 50)
  return KIND[r.workload] === 'latency' ? `${millis(median)} p50` : int(median)
}

const isPeer = (e: Entrant): boolean => e.id !== 'pgonce' && e.id !== 'pgonce-baseline' && e.id !== 'limit'

export function renderMarkdown(run: BenchRun): string {
  const baseline = run.systems.find((s) => s.id === 'pgonce-baseline')
  const header = [
    'workload',
    'mode',
    ...run.systems.map((s) => s.label),
    'limit',
    'pgonce ÷ best peer',
    'pgonce ÷ limit',
    ...(baseline ? [`pgonce ÷ ${baseline.label}`] : []),
  ]
  const out = [row(header), row(header.map(() => '---'))]
  const shown = WORKLOAD_IDS.filter((id) =>
    run.systems.some((s) => s.passes.some((p) => p.workloads[id] || p.errors[id])),
  )
  for (const id of shown) {
    for (const mode of run.modes) {
      const r = run.rounds.find((x) => x.workload === id && x.mode === mode)
      out.push(
        row([
          title(id, run.sizes),
          MODE_LABEL[mode],
          ...run.systems.map((s) => cell(s, id, mode)),
          limitCell(r),
          ratioCell(r, isPeer),
          ratioCell(r, (e) => e.id === 'limit'),
          ...(baseline ? [ratioCell(r, (e) => e.id === 'pgonce-baseline')] : []),
        ]),
      )
    }
  }
  const m = run.machine
  out.push(
    '',
    `Each system's cell is its best pass (the configuration's letter in brackets); "as is" times the tables as the earlier workloads left them, ` +
      '"analysed" after `VACUUM ANALYZE` and a `CHECKPOINT`. The ratios come from the paired rounds: pgonce against each side, one round after ' +
      `another with the order rotating, ${run.rounds[0]?.entrants[0]?.figures.length ?? 0} rounds; the geometric mean of the rounds' ratios ` +
      '(lowest–highest round), each side in its configuration with the best mean over the rounds. For W6 and W7 a ratio of p50 latencies ' +
      '(below 1 is faster), else of throughput (above 1 is faster). The limit is its median over the rounds.',
    '',
    "Limits (from Node, on pgonce's jobs table, each on connections of its own):",
    ...shown.filter((id) => LIMIT_LABEL[id]).map((id) => `- ${id}: ${LIMIT_LABEL[id]}`),
    '',
    'Configurations:',
  )
  for (const s of run.systems) {
    out.push(`- **${s.label}**: ${s.common.join('; ')}`)
    for (const c of s.configs)
      out.push(`  - [${c.letter}] ${c.purpose}: ${c.lines.join('; ')} (${c.workloads.join(', ')})`)
  }
  out.push(
    '',
    `Machine: ${m.host}, ${m.cpus} × ${m.cpuModel}, ${m.memoryGb} GB, Node ${m.node}, ${m.postgres} (${m.postgresKind})` +
      `${m.redis ? `, Redis ${m.redis}` : ''}; code ${run.code}${run.baseline ? `, baseline \`${run.baseline.ref}\` = ${run.baseline.sha.slice(0, 12)}` : ''}; ` +
      `BENCH_SCALE=${run.scale}; ${Math.round(run.seconds)} s.`,
  )
  const errors = [
    ...run.systems.flatMap((s) =>
      s.passes.flatMap((p) =>
        Object.entries(p.errors).map(
          ([w, e]) =>
            `- ${s.label} [${s.configs.find((c) => c.key === p.config)?.letter}] ${MODE_LABEL[p.mode]} ${w}: ${String(e).split('\n')[0]}`,
        ),
      ),
    ),
    ...run.errors.map((e) => `- ${e.split('\n')[0]}`),
  ]
  if (errors.length) out.push('', 'Errors:', ...errors)
  return out.join('\n')
}
