// The contract every benchmarked queue implements, so that each workload runs the same code on each system.

/** The payload of every benchmark job: its index, and for latency runs the enqueue time. */
export interface JobData {
  i: number
  /** `performance.timeOrigin + performance.now()` when the add was called (W6). */
  t?: number
}

/** A running consumer; `close()` stops fetching and waits for in-flight jobs. */
export interface Consumer {
  close(): Promise<void>
}

export interface QueueSetup {
  /** The queue is used with the system's own dedup feature (W5, W7). */
  dedup?: boolean
}

/** One system, opened on its own fresh database (or Redis prefix). */
export interface BenchSystem {
  /** Creates the queue where the system needs that; not timed. */
  prepare(queue: string, setup?: QueueSetup): Promise<void>
  /** One plain add, awaited. */
  add(queue: string, data: JobData): Promise<void>
  /** One bulk call adding every item of `batch`. */
  addBulk(queue: string, batch: JobData[]): Promise<void>
  /** One add through the system's own dedup feature under `key`. */
  addDeduplicated(queue: string, key: string, data: JobData): Promise<void>
  /** Jobs of `queue` in any state. */
  countJobs(queue: string): Promise<number>
  /** Jobs of `queue` not completed yet. */
  countUnfinished(queue: string): Promise<number>
  /** Starts processing `queue` with concurrency 16; `onStart` runs as each handler starts. */
  consume(queue: string, onStart: (data: JobData) => void): Promise<Consumer>
  close(): Promise<void>
}

export type SystemId = 'pgonce' | 'pgonce-baseline' | 'graphile-worker' | 'pg-boss' | 'bullmq-postgres' | 'bullmq-redis'

/** The workloads, in table order. W4B is W4 drained by a batch handler: pgonce's guard, not a comparison with peers. */
export const WORKLOAD_IDS = ['W1', 'W2', 'W3', 'W4', 'W4B', 'W5', 'W6', 'W7', 'W8'] as const
export type WorkloadId = (typeof WORKLOAD_IDS)[number]

/** What a configuration competes in when it names no workloads: all but W4B, which needs a batch consumer. */
export const COMMON_WORKLOADS: readonly WorkloadId[] = WORKLOAD_IDS.filter((id) => id !== 'W4B')

/**
 * One way of setting a system up, as a user tuning it for some workloads would. A system with several runs each of
 * them on the workloads it is a candidate for, and the table shows the best per workload (with its footnote letter).
 */
export interface SystemConfig {
  /** Short, stable name, e.g. `local-queue`; kept in the JSON and shown in the footnote. */
  key: string
  /** What this configuration is for, e.g. `throughput (its performance guide)`. */
  purpose: string
  /** The settings, one line each, as printed under the table. */
  lines: string[]
  /** The workloads it competes in; COMMON_WORKLOADS when absent. */
  workloads?: readonly WorkloadId[]
}

/** A system's identity, its configurations as written under the table, and how to open it. */
export interface SystemInfo {
  id: SystemId
  /** Name and version, e.g. `graphile-worker 0.18.0`. */
  label: string
  backend: 'postgres' | 'redis'
  /** Setup common to every configuration, one line per setting that differs from the system's defaults. */
  common: string[]
  /** At least one; the first is the one `BENCH_CONFIGS=first` keeps. */
  configs: readonly SystemConfig[]
  /** Opens the system on `url` (a fresh PostgreSQL database, or a Redis URL) in configuration `config` (a key). */
  open(url: string, config: string): Promise<BenchSystem>
}

/** The configuration `key` of `info`; throws on an unknown key. */
export function configOf(info: SystemInfo, key: string): SystemConfig {
  const config = info.configs.find((c) => c.key === key)
  if (!config)
    throw new Error(`${info.id} has no configuration ${key} (known: ${info.configs.map((c) => c.key).join(', ')})`)
  return config
}

/** How many jobs a consumer runs at once in every workload. */
export const CONCURRENCY = 16
