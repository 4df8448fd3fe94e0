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

export type SystemId = 'pgonce' | 'graphile-worker' | 'pg-boss' | 'bullmq-postgres' | 'bullmq-redis'

/** A system's identity, its configuration as written under the table, and how to open it. */
export interface SystemInfo {
  id: SystemId
  /** Name and version, e.g. `graphile-worker 0.18.0`. */
  label: string
  backend: 'postgres' | 'redis'
  /** One line per setting that differs from the system's defaults, and why. */
  config: string[]
  /** Opens the system on `url`: a fresh PostgreSQL database, or a Redis URL. */
  open(url: string): Promise<BenchSystem>
}

/** How many jobs a consumer runs at once in every workload. */
export const CONCURRENCY = 16
