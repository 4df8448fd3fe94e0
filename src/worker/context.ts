// The per-job state a worker keeps (token, phase, lease) and the `ctx` its handler gets: signal, transaction, effect, runOnce, progress.

import type pg from 'pg'
import { inTransaction, isConnectionError } from '../db/checkout.js'
import type { Effects, RunOnceOptions } from '../effects.js'
import { type RateLimitOptions, checkRateLimitCall } from './rate-limit.js'
import { JobCancelledError, JobTimeoutError, LeaseLostError, RetryLaterError } from '../errors.js'
import type { Job } from '../job.js'
import type { Logger } from '../logger.js'
import { checkText, fail, serializeData } from '../validate.js'
import type { ClaimedRow, JobStore } from './job-store.js'
import type { JobContext } from './job-context.js'

/** What a job's context needs from its worker. */
export interface ContextServices {
  pool: pg.Pool
  store: JobStore
  effects: Effects
  retryLaterMs: number
  logger: Logger
  /** The worker's timeoutMs, for jobs without their own; null: none. */
  timeoutMs: number | null
}

/** Largest `ctx.updateProgress` value, in bytes of JSON. */
const MAX_PROGRESS_BYTES = 65_536

/** The result as JSON text for the jobs table; null for undefined or anything jsonb cannot hold. */
export function resultJson(value: unknown, logger: Logger, jobId: string): string | null {
  if (value === undefined || value === null) return null
  try {
    const text = JSON.stringify(value)
    if (text === undefined) return null
    if (!text.includes('\\u0000')) return text
  } catch {
    // falls through to the warning
  }
  logger.warn({ jobId }, 'pgonce: handler result is not storable as JSON; stored as null')
  return null
}

export class HeldJob<Data> implements JobContext {
  /** Where the job is in the worker (the state machine in runner.ts's header). */
  phase: 'ready' | 'running' | 'settling' = 'ready'
  /** A heartbeat (or a refused write) found the lease taken over: nothing this worker writes about the job will apply. */
  lost = false
  /** Set once `ctx.transaction` is committing or has committed the completion. */
  completion: { state: 'committing' | 'committed'; result: unknown; ended: 'completed' | 'cancelled' } | null = null
  /** Set when the job must run again later without counting the attempt (ms). */
  retryLaterMs: number | null = null
  /** Set when `close()` gave up waiting and aborted the handler. */
  abandoned = false
  /** Set when its handler started: from then on its lease is watched by this process's clock (leases.ts). */
  watched = false
  /** Set when a heartbeat learned that `queue.cancelJob` asked this job to stop. */
  cancelRequested = false
  /** Set when the run reached its timeout: the attempt is failed with it, and what the handler does after is ignored. */
  timedOut: JobTimeoutError | null = null
  /** The run's timeout in ms (the job's, else the worker's), null without one. */
  readonly timeoutMs: number | null
  /**
   * When the run times out by this process's monotonic clock (performance.now()): the claim was sent at `leaseFrom`,
   * before the database's now() that started the run, so this is never after the database's deadline (timeout_at).
   */
  readonly deadline: number | null
  #controller: AbortController | undefined
  #abortReason: Error | undefined
  #runLogger: Logger | undefined
  // An ES private field: the worker's pool (and its connection string) stays out of what a logger, JSON.stringify or
  // util.inspect reads from a handler's `ctx` (docs/observability.md, "Logging").
  readonly #services: ContextServices

  constructor(
    readonly row: ClaimedRow,
    readonly job: Job<Data>,
    services: ContextServices,
    /**
     * When the statement that set the job's current lease was sent (performance.now(), the monotonic clock, which runs
     * on while the process is stopped): the lease ends no earlier than `leaseMs` after it (leases.ts).
     */
    public leaseFrom: number,
  ) {
    this.#services = services
    this.timeoutMs = row.timeout_ms ?? services.timeoutMs
    this.deadline = this.timeoutMs === null ? null : leaseFrom + this.timeoutMs
  }

  /** The run's timeout error when it has reached its deadline by this process's clock (even with the timer not run yet: a blocked event loop), else null. */
  pastDeadline(): JobTimeoutError | null {
    if (this.timedOut !== null || this.deadline === null || performance.now() < this.deadline) return this.timedOut
    return new JobTimeoutError(this.id, this.timeoutMs as number)
  }

  /** What a logger or JSON.stringify shows of `ctx`: the run it belongs to. */
  toJSON(): { jobId: string; jobName: string; attempt: number; aborted: boolean } {
    return {
      jobId: this.id,
      jobName: this.row.name,
      attempt: this.job.attempts,
      aborted: this.#abortReason !== undefined,
    }
  }

  get id(): string {
    return this.row.id
  }

  get token(): string {
    return this.row.lock_token
  }

  get signal(): AbortSignal {
    // Created on first use: most handlers never look, and a controller per job costs.
    if (this.#controller === undefined) {
      this.#controller = new AbortController()
      if (this.#abortReason !== undefined) this.#controller.abort(this.#abortReason)
    }
    return this.#controller.signal
  }

  get logger(): Logger {
    this.#runLogger ??= this.#services.logger.child({
      jobId: this.id,
      jobName: this.row.name,
      attempt: this.job.attempts,
    })
    return this.#runLogger
  }

  /** Aborts `ctx.signal` (once). */
  abort(reason: Error): void {
    if (this.#abortReason !== undefined) return
    this.#abortReason = reason
    this.#controller?.abort(reason)
  }

  // The ctx methods are getters returning arrow functions, so that `const { transaction } = ctx` works;
  // nothing is allocated for a handler that does not use them.
  get transaction(): JobContext['transaction'] {
    return (fn) => this.completeInTransaction(fn)
  }

  get effect(): JobContext['effect'] {
    return (key, fn) => this.runEffect(key, fn)
  }

  get runOnce(): JobContext['runOnce'] {
    return (key, work, opts) => this.runOnceOrRetryLater(key, work, opts)
  }

  get updateProgress(): JobContext['updateProgress'] {
    return (value) => this.storeProgress(value)
  }

  get rateLimit(): JobContext['rateLimit'] {
    return (ms, options) => this.holdQueue(ms, options)
  }

  private async holdQueue(ms: number, options?: RateLimitOptions): Promise<never> {
    const hold = checkRateLimitCall(ms, options)
    this.checkUsable('ctx.rateLimit')
    const { store } = this.#services
    if (hold.scope === 'group') {
      const held = await store.holdGroup(this.id, this.token, hold.ms)
      if (held === 'lost') throw new LeaseLostError(this.id)
      if (held === 'no-group')
        fail('INVALID_TYPE', 'options.scope', `'group' needs a job added with a group; job ${this.id} has none`)
    } else {
      await store.holdQueue(hold.ms)
    }
    this.retryLaterMs = 0
    throw new RetryLaterError(
      0,
      `pgonce: job ${this.id} hit a rate limit; its ${hold.scope} starts nothing for ${hold.ms} ms`,
    )
  }

  /** Throws at the call, before anything is written, when the job can no longer take writes of this run. */
  private checkUsable(what: string): void {
    if (this.completion !== null) {
      throw new Error(
        `pgonce: ${what} after ctx.transaction completed job ${this.id}; put every write of the job before it, or inside it`,
      )
    }
    const timedOut = this.pastDeadline()
    if (timedOut !== null) throw timedOut
    if (this.lost) throw new LeaseLostError(this.id)
  }

  private async completeInTransaction<T>(fn: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
    this.checkUsable('ctx.transaction')
    const { pool, store, logger } = this.#services
    const pending = {
      state: 'committing' as const,
      result: undefined as unknown,
      ended: 'completed' as 'completed' | 'cancelled',
    }
    try {
      return await inTransaction(pool, logger, async (tx) => {
        const value = await fn(tx)
        const ended = (
          await store.complete([{ id: this.id, token: this.token, resultJson: resultJson(value, logger, this.id) }], tx)
        ).get(this.token)
        // Refused: the run passed its deadline (timeout_at), or the lease was taken over.
        if (ended === undefined) throw this.pastDeadline() ?? new LeaseLostError(this.id)
        if (ended === 'cancelled') throw new JobCancelledError(this.id)
        pending.result = value
        this.completion = pending
        return value
      }).then((value) => {
        this.completion = { ...pending, state: 'committed' }
        return value
      })
    } catch (err) {
      if (this.completion?.state === 'committing') {
        // The COMMIT was sent, but its answer was lost with the connection: ask the database whether it committed.
        if (isConnectionError(err) && (await this.committedMeanwhile())) {
          this.completion = { ...pending, state: 'committed' }
          return pending.result as T
        }
        this.completion = null
      }
      throw err
    }
  }

  private async committedMeanwhile(): Promise<boolean> {
    try {
      return (await this.#services.store.recorded([this.id], [this.token])).has(this.token)
    } catch {
      return false
    }
  }

  private async runEffect(key: string, fn: (tx: pg.PoolClient) => Promise<unknown>): Promise<'ran' | 'duplicate-done'> {
    checkText(key, 'key')
    if (typeof fn !== 'function') fail('INVALID_TYPE', 'fn', `must be a function, got ${typeof fn}`)
    this.checkUsable('ctx.effect')
    const { pool, effects, logger } = this.#services
    if (await effects.knownRecorded(key)) {
      effects.outcomes.increment('duplicate-done')
      return 'duplicate-done'
    }
    const outcome = await inTransaction(pool, logger, async (tx) => {
      if (!(await effects.recordInLedger(tx, key, this.id))) return 'duplicate-done' as const
      await fn(tx)
      return 'ran' as const
    })
    effects.outcomes.increment(outcome)
    if (outcome === 'duplicate-done') effects.repeatedEffect(key)
    return outcome
  }

  private async runOnceOrRetryLater(
    key: string,
    work: () => unknown,
    opts?: RunOnceOptions,
  ): Promise<'ran' | 'duplicate-done'> {
    const outcome = await this.#services.effects.runOnce(key, work, opts)
    if (outcome !== 'duplicate-running') return outcome
    this.retryLaterMs = this.#services.retryLaterMs
    throw new RetryLaterError(
      this.#services.retryLaterMs,
      `pgonce: '${key}' is running elsewhere; job ${this.id} retries later`,
    )
  }

  private async storeProgress(value: unknown): Promise<void> {
    const json = serializeData(value, 'progress', MAX_PROGRESS_BYTES)
    this.checkUsable('ctx.updateProgress')
    if (!(await this.#services.store.progress(this.id, this.token, json))) {
      this.lost = true
      throw new LeaseLostError(this.id)
    }
  }
}
