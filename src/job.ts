// The Job a Queue hands back: a stored row plus how the add that returned it was decided.

import type { Transactional } from './db/executor.js'

/**
 * Where a job stands. Pending: `waiting`, `delayed`, `waiting-children`. Live: pending or `active` (a worker claimed it
 * and runs its handler). Terminal: `completed`, `failed`, `cancelled`.
 */
export type JobState = 'waiting' | 'delayed' | 'waiting-children' | 'active' | 'completed' | 'failed' | 'cancelled'

/** How an add was decided (docs/deduplication.md). */
export type AddOutcome = 'added' | 'duplicate-job-id' | 'duplicate-key' | 'extended' | 'replaced'

export const JOB_STATES: readonly JobState[] = [
  'waiting',
  'delayed',
  'waiting-children',
  'active',
  'completed',
  'failed',
  'cancelled',
]

/** Backoff between attempts, as stored. */
export interface Backoff {
  type: 'fixed' | 'exponential'
  /** Base delay in ms. */
  delay: number
  /** 0..1: the share of each delay that is randomised. (Default: 0 for fixed, 0.5 for exponential) */
  jitter?: number
}

/** A row of `<schema>.jobs`, as pg returns it. */
export interface JobRow {
  id: string
  queue: string
  name: string
  job_id: string | null
  data: unknown
  state: JobState
  priority: number
  run_at: Date
  attempts: number
  max_attempts: number
  backoff: Backoff | null
  dedup_key: string | null
  lock_token: string | null
  locked_until: Date | null
  last_error: string | null
  error_stack: string | null
  created_at: Date
  finished_at: Date | null
  /** Absent from rows the add statements answer for a job they inserted (none of these is set yet then). */
  started_at?: Date | null
  result?: unknown
  progress?: unknown
  cancel_requested_at?: Date | null
  /** The job's own timeout in ms (null: the worker's, if any). */
  timeout_ms?: number | null
}

/** What a Job needs from its queue. */
export interface JobOwner {
  /** @internal Stripped from the published types together with the Queue's and Worker's implementations. */
  removeOwnedDeduplicationKey(key: string, jobId: string, options?: { tx?: Transactional }): Promise<boolean>
}

/** A Job's data, as `JSON.stringify(job)` and loggers see it: its public fields, never its Queue or Worker. */
export type JobJson<Data = unknown> = Omit<Job<Data>, 'removeDeduplicationKey' | 'toJSON'>

/**
 * A job as read or added. `Result` types `result` and `Name` types `name`: a queue's definition (`defineQueue`, see
 * src/define-queue.ts) fills them in, so that a switch on `job.name` narrows `job.data` and `job.result`.
 */
export class Job<Data = unknown, Result = unknown, Name extends string = string> {
  // An ES private field, not a TypeScript one: the owner (a Queue or Worker, and through it a pool and its connection
  // string) must be unreachable for loggers, JSON.stringify and util.inspect (docs/observability.md, "Logging").
  readonly #owner: JobOwner
  /** Internal id, unique forever. */
  readonly id: string
  /** The caller's custom id, if any. */
  readonly jobId: string | null
  readonly name: Name
  readonly queue: string
  /** The stored data (for a duplicate: the data of the job that answers, not of this call). */
  readonly data: Data
  /** The state when this object was read. */
  readonly state: JobState
  /** Runs started so far. */
  readonly attempts: number
  readonly maxAttempts: number
  readonly priority: number
  readonly backoff: Backoff | null
  readonly runAt: Date
  readonly createdAt: Date
  /** When its handler last started. */
  readonly startedAt: Date | null
  readonly finishedAt: Date | null
  /** What the handler returned (stored as JSON), once completed; null before. */
  readonly result: Result | null
  /** The last value the handler reported with `ctx.updateProgress`. */
  readonly progress: unknown
  /** Set when `queue.cancelJob` asked a running job to stop. */
  readonly cancelRequestedAt: Date | null
  /** How long one run may take, in ms, as added (`timeoutMs`); null: the worker's `timeoutMs` applies, if any. */
  readonly timeoutMs: number | null
  /** The dedup key this job was added with. */
  readonly deduplicationId: string | null
  /** Message of the last failure. */
  readonly failedReason: string | null
  /** Stack of the last failure. */
  readonly stacktrace: string | null
  /** false: this call inserted it; true: an existing job answers. Null when read by id. */
  readonly deduplicated: boolean | null
  /** How the add was decided. Null when read by id. */
  readonly outcome: AddOutcome | null

  constructor(row: JobRow, outcome: AddOutcome | null, owner: JobOwner) {
    this.#owner = owner
    this.id = row.id
    this.jobId = row.job_id
    this.name = row.name as Name
    this.queue = row.queue
    this.data = row.data as Data
    this.state = row.state
    this.attempts = row.attempts
    this.maxAttempts = row.max_attempts
    this.priority = row.priority
    this.backoff = row.backoff
    this.runAt = row.run_at
    this.createdAt = row.created_at
    this.startedAt = row.started_at ?? null
    this.finishedAt = row.finished_at
    this.result = (row.result ?? null) as Result | null
    this.progress = row.progress ?? null
    this.cancelRequestedAt = row.cancel_requested_at ?? null
    this.timeoutMs = row.timeout_ms ?? null
    this.deduplicationId = row.dedup_key
    this.failedReason = row.last_error
    this.stacktrace = row.error_stack
    this.outcome = outcome
    this.deduplicated = outcome === null ? null : outcome !== 'added' && outcome !== 'replaced'
  }

  /**
   * Deletes this job's dedup key only if this generation still owns it; true if the key was held (an expired TTL key
   * this job owned is deleted too, and answers false, as `queue.removeDeduplicationKey` does).
   */
  async removeDeduplicationKey(options?: { tx?: Transactional }): Promise<boolean> {
    if (this.deduplicationId === null) return false
    return this.#owner.removeOwnedDeduplicationKey(this.deduplicationId, this.id, options)
  }

  /** The job's public fields, for `JSON.stringify(job)`, `res.json(job)` and loggers. */
  toJSON(): JobJson<Data> {
    return {
      id: this.id,
      jobId: this.jobId,
      name: this.name,
      queue: this.queue,
      data: this.data,
      state: this.state,
      attempts: this.attempts,
      maxAttempts: this.maxAttempts,
      priority: this.priority,
      backoff: this.backoff,
      runAt: this.runAt,
      createdAt: this.createdAt,
      startedAt: this.startedAt,
      finishedAt: this.finishedAt,
      result: this.result,
      progress: this.progress,
      cancelRequestedAt: this.cancelRequestedAt,
      timeoutMs: this.timeoutMs,
      deduplicationId: this.deduplicationId,
      failedReason: this.failedReason,
      stacktrace: this.stacktrace,
      deduplicated: this.deduplicated,
      outcome: this.outcome,
    }
  }
}
