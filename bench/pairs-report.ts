// The shape and the table of a paired comparison (pairs.ts): per workload and mode, the working tree's figure over
// the baseline's in each pair, their geometric mean and its 95% interval (Student's t over the pairs' log ratios).

import { MODE_LABEL, figureOf, kindOf } from './report.js'
import type { BaselineInfo, PassRun, RunHeader } from './run-result.js'
import type { Mode, WorkloadId } from './workloads/context.js'

export interface PairedSystem {
  id: string
  label: string
  passes: (PassRun & { pair: number })[]
}

export interface PairedRun extends RunHeader {
  pairs: number
  workloads: WorkloadId[]
  baseline: BaselineInfo
  /** The working tree's pgonce first, the baseline second. */
  systems: PairedSystem[]
}

export interface PairedRatio {
  /** Per pair: working tree ÷ baseline for throughput, baseline ÷ working tree for p50 latency (above 1: faster). */
  ratios: number[]
  geomean: number
  low: number
  high: number
}

/** Two-sided 95% quantiles of Student's t for 1–30 degrees of freedom (beyond: the normal's 1.96). */
const T95 = [12.71, 4.3, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.2, 2.18, 2.16, 2.14, 2.13, 2.12, 2.11,
  2.1, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04]

/** The geometric mean of `ratios` and its 95% interval; undefined with fewer than two. */
export function summarise(ratios: number[]): PairedRatio | undefined {
  const n = ratios.length
  if (n < 2) return undefined
  const logs = ratios.map(Math.log)
  const mean = logs.reduce((a, b) => a + b, 0) / n
  const sd = Math.sqrt(logs.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1))
  const half = (T95[n - 2] ?? 1.96) * sd / Math.sqrt(n)
  return { ratios, geomean: Math.exp(mean), low: Math.exp(mean - half), high: Math.exp(mean + half) }
}

/** The pairs' ratios for workload `id` in `mode` (pairs where either side failed or was wrong are left out). */
export function pairRatios(run: PairedRun, id: WorkloadId, mode: Mode): number[] {
  const [mine, theirs] = run.systems
  const out: number[] = []
  for (let i = 0; i < run.pairs; i++) {
    const a = mine?.passes.find((p) => p.pair === i && p.mode === mode)?.workloads[id]
    const b = theirs?.passes.find((p) => p.pair === i && p.mode === mode)?.workloads[id]
    const [x, y] = [figureOf(id, a), figureOf(id, b)]
    if (x === undefined || y === undefined || !a?.correct || !b?.correct) continue
    out.push(kindOf(id) === 'rate' ? x / y : y / x)
  }
  return out
}

const times = (n: number): string => `${n.toFixed(2)}×`

/**
 * How the interval reads: inside ±15% (this VM's run-to-run noise) on both ends, wholly below or above 1, or neither
 * (the pairs do not settle it).
 */
function verdict(r: PairedRatio): string {
  if (r.low >= 1 / 1.15 && r.high <= 1.15) return 'within ±15%'
  if (r.high < 1) return 'slower'
  if (r.low > 1) return 'faster'
  return 'not settled'
}

export function renderPairs(run: PairedRun): string {
  const lines = [
    `## pgonce (working tree) ÷ pgonce@${run.baseline.short}, ${run.pairs} alternated pairs`,
    '',
    `${run.machine.cpuModel}, ${run.machine.cpus} CPUs, ${run.machine.postgres}; scale ${run.scale}; ${Math.round(run.seconds)} s. ` +
      'Above 1: the working tree is faster (throughput ratio, or the inverse ratio of p50 latencies).',
    '',
    '| workload | mode | per pair | geometric mean | 95% interval | reads as |',
    '| --- | --- | --- | --- | --- | --- |',
  ]
  for (const id of run.workloads) {
    for (const mode of run.modes) {
      const r = summarise(pairRatios(run, id, mode))
      lines.push(r
        ? `| ${id} | ${MODE_LABEL[mode]} | ${r.ratios.map(times).join(' ')} | ${times(r.geomean)} | ${times(r.low)}–${times(r.high)} | ${verdict(r)} |`
        : `| ${id} | ${MODE_LABEL[mode]} | — | — | — | too few correct pairs |`)
    }
  }
  return lines.join('\n')
}
