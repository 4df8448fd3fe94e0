// The shape of one benchmark run: what the table is rendered from and what bench/results/*.json holds.

import type { Sizes } from './config.js'
import type { ServerLimits } from './pgbench.js'
import type { SystemId } from './systems/system.js'
import type { WorkloadId, WorkloadResult } from './workloads/context.js'

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

export interface SystemRun {
  id: SystemId
  label: string
  backend: 'postgres' | 'redis'
  config: string[]
  workloads: Partial<Record<WorkloadId, WorkloadResult>>
  /** Why a workload (or opening the system) failed. */
  errors: Partial<Record<WorkloadId | 'open', string>>
}

export interface BenchRun {
  startedAt: string
  seconds: number
  machine: Machine
  scale: number
  sizes: Sizes
  limits: ServerLimits | { skipped: string }
  systems: SystemRun[]
  notes: string[]
}
