// What a handler gets besides its job: the public `ctx` (src/worker/context.ts holds the per-job state behind it).

import type pg from 'pg'
import type { RunOnceOptions } from '../effects.js'
import type { Logger } from '../logger.js'
import type { RateLimitOptions } from './rate-limit.js'

/** What a handler gets besides its job. */
export interface JobContext {
  /**
   * Aborts when the lease is lost (reason: `LeaseLostError`), when `queue.cancelJob` cancels the job
   * (`JobCancelledError`), when the run reaches its timeout (`JobTimeoutError`), or when `close()` stops waiting for
   * the handler.
   */
  readonly signal: AbortSignal
  /**
   * Runs `fn` in a transaction on a connection of the worker's pool and completes this job in the same transaction:
   * your writes and the completion commit together or not at all. The job's stored result is `fn`'s return value.
   * Throws `LeaseLostError` (and rolls back your writes) if the lease was taken over, `JobCancelledError` if the job was
   * cancelled meanwhile. At most once per job, and no `ctx.effect` after it: the job is completed when it returns.
   */
  transaction<T>(fn: (tx: pg.PoolClient) => Promise<T>): Promise<T>
  /**
   * Records effect `key` in `processed_effects` and, the first time only, runs `fn`, in one transaction of its own:
   * the ledger row and `fn`'s writes commit together. `'duplicate-done'`: recorded before (by an earlier run of this
   * job or anyone else), `fn` skipped. Call it as often as the job has effects (charge, then receipt), each with its
   * own key; the job completes after the handler returns. A run that dies after an effect committed runs again, and
   * that effect is skipped.
   */
  effect(key: string, fn: (tx: pg.PoolClient) => Promise<unknown>): Promise<'ran' | 'duplicate-done'>
  /**
   * `Effects.runOnce` on the worker's pool: runs `work` unless the key is done or claimed. When another holder is
   * running it (`duplicate-running`), this job is rescheduled (`retryLaterMs`, the attempt not counted) instead of
   * succeeding: it throws `RetryLaterError`, and the job is rescheduled even if you catch it.
   */
  runOnce(key: string, work: () => unknown, opts?: RunOnceOptions): Promise<'ran' | 'duplicate-done'>
  /** Stores `value` (a number or small JSON) as `job.progress`; throws `LeaseLostError` if the lease was lost. */
  updateProgress(value: unknown): Promise<void>
  /**
   * The upstream answered 429: no job of this queue (`options.scope` 'queue', the default) or of this job's group
   * ('group': other groups go on) starts, on any worker, for `ms` (database clock), and this job goes back to
   * `waiting` without counting its attempt. Always throws (`RetryLaterError`); the job is given back even if you catch
   * it. A job without a group asking for 'group' gets a `ValidationError` naming `options.scope`, and is not given back.
   * docs/flow-control.md.
   */
  rateLimit(ms: number, options?: RateLimitOptions): Promise<never>
  /** The worker's logger, bound to this run: `queue`, `worker`, `jobId`, `jobName` and `attempt` on every line. */
  readonly logger: Logger
}
