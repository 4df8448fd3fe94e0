// The shape of one benchmark run: what the table is rendered from and what bench/results/*.json holds.

import type { Sizes } from './config.js'
import type { LimitPass } from './limits.js'
import type { ServerLimits } from './pgbench.js'
import type { PairedShare } from './paired.js'
import type { PeerPairedShare } from './paired-peer.js'
import type { DrainPairedShare } from './paired-drains.js'
import type { PassRun } from './pass.js'
import type { SystemId } from './systems/system.js'
import type { Mode, WorkloadId, WorkloadResult } from './workloads/context.js'

export type { PassRun } from './pass.js'

export interface Machine {
  host: string
  cpus: number
  cpuModel: string
  memoryGb: number
  node: string
  postgres: string
  /** How the server was reached: DATABASE_URL, a container, or embedded binaries. */
  postgresKind: string
  redis: string | null
}

/** One configuration of one system, as run, with the footnote letter it has in the table. */
export interface ConfigRun {
  key: string
  letter: string
  purpose: string
  lines: string[]
  /** The workloads it competed in. */
  workloads: WorkloadId[]
}

export interface SystemRun {
  id: SystemId
  label: string
  backend: 'postgres' | 'redis'
  common: string[]
  configs: ConfigRun[]
  passes: PassRun[]
  /** Derived from `passes` (see report.ts `bestOf`): per mode and workload, the letter of the configuration shown. */
  best: Partial<Record<Mode, Partial<Record<WorkloadId, string>>>>
}

export interface BaselineInfo {
  ref: string
  sha: string
  short: string
  lockfileDiffers: boolean
}

/** What every run records about itself (npm run bench, npm run bench:pairs). */
export interface RunHeader {
  startedAt: string
  seconds: number
  machine: Machine
  scale: number
  sizes: Sizes
  modes: Mode[]
}

export interface BenchRun extends RunHeader {
  /** BENCH_MATERIAL: the relative difference between the modes above which both rows are printed. */
  material: number
  /** Physical limits from Node on pgonce's jobs table, one pass per mode (empty with BENCH_LIMITS=0). */
  limits: LimitPass[]
  /**
   * The one-connection and sixteen-connection INSERT, 1,000-row INSERT and INSERT + NOTIFY limits measured again after
   * every pass, one pass per mode: a share of the limit is taken against the mean of both (absent in older runs).
   */
  limitsAfter?: LimitPass[]
  /** The workloads judged against a limit (W1, W2, W3, W5, W6), each alternated with it in rounds after the passes, one per workload and mode (bench/paired.ts). */
  paired?: PairedShare[]
  /** W6 alternated in rounds with the peer that was best at it in the passes, one per mode (bench/paired-peer.ts). */
  pairedPeers?: PeerPairedShare[]
  /** W4 and W8: pgonce, the peer best at each in the passes and the claim-and-delete loop in rotating rounds, one per workload and mode (bench/paired-drains.ts). */
  pairedDrains?: DrainPairedShare[]
  /** pgbench on a scratch table: a secondary reference. */
  pgbench: ServerLimits | { skipped: string }
  baseline: BaselineInfo | null
  systems: SystemRun[]
  notes: string[]
}
