// The per-job state a worker keeps (token, phase, lease) and the `ctx` its handler gets: signal, transaction, runOnce, effect.

import type pg from 'pg'
import type { Effects, RunOnceOptions } from '../effects.js'
import { LeaseLostError } from '../errors.js'
import type { Job } from '../job.js'
import type { Logger } from '../logger.js'
import type { ClaimedRow, JobStore } from './job-store.js'
import { RetryLaterError } from './retry-later.js'

/** What a handler gets besides its job. */
export interface JobContext {
  /** Aborts (reason: `LeaseLostError`) when a heartbeat finds the lease taken over, or when `close()` stops waiting for the handler. */
  readonly signal: AbortSignal
  /**
   * Runs `fn` in a transaction on a connection of the worker's pool and completes
   * this job in the same transaction: your writes and the completion commit
   * together or not at all. The job's stored result is `fn`'s return value. Throws
   * `LeaseLostError` (and rolls back your writes) if the lease was taken over. Call it
   * at most once per job; the job is completed when it returns.
   */
  transaction<T>(fn: (tx: pg.PoolClient) => Promise<T>): Promise<T>
  /**
   * `Effects.runOnce` on the worker's pool: runs `work` unless the key is done or
   * claimed. When another holder is running it (`duplicate-running`), this job is
   * rescheduled (`retryLaterMs`, the attempt not counted) instead of succeeding:
   * it throws `RetryLaterError`, and the job is rescheduled even if you catch it.
   */
  runOnce(key: string, work: () => unknown, opts?: RunOnceOptions): Promise<'ran' | 'duplicate-done'>
  /**
   * Records effect `key` in `processed_effects` and, the first time only, runs `fn`,
   * all inside `ctx.transaction`: the ledger row, `fn`'s writes and this job's
   * completion commit together. `'duplicate-done'`: recorded before, `fn` skipped.
   */
  effect(key: string, fn: (tx: pg.PoolClient) => Promise<unknown>): Promise<'ran' | 'duplicate-done'>
}

/** What a job's context needs from its worker. */
export interface ContextServices {
  pool: pg.Pool
  store: JobStore
  effects: Effects
  retryLaterMs: number
  logger: Logger
}

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
  /** buffered: claimed, not started; running: handler running; settling: handler done, outcome being written. */
  phase: 'buffered' | 'running' | 'settling' = 'buffered'
  /** A heartbeat found the lease taken over: nothing this worker writes about the job will apply. */
  lost = false
  /** Set once `ctx.transaction` is committing or has committed the completion. */
  completion: { state: 'committing' | 'committed'; result: unknown } | null = null
  /** Set when the job must run again later without counting the attempt (ms). */
  retryLaterMs: number | null = null
  /** Set when `close()` gave up waiting and aborted the handler. */
  abandoned = false
  private controller: AbortController | undefined
  private abortReason: Error | undefined

  constructor(
    readonly row: ClaimedRow,
    readonly job: Job<Data>,
    private readonly services: ContextServices,
  ) {}

  get id(): string {
    return this.row.id
  }

  get token(): string {
    return this.row.lock_token
  }

  get signal(): AbortSignal {
    // Created on first use: most handlers never look, and a controller per job costs.
    if (this.controller === undefined) {
      this.controller = new AbortController()
      if (this.abortReason !== undefined) this.controller.abort(this.abortReason)
    }
    return this.controller.signal
  }

  /** Aborts `ctx.signal` (once). */
  abort(reason: Error): void {
    if (this.abortReason !== undefined) return
    this.abortReason = reason
    this.controller?.abort(reason)
  }

  // The ctx methods are getters returning arrow functions, so that `const { transaction } = ctx` works;
  // nothing is allocated for a handler that does not use them.
  get transaction(): JobContext['transaction'] {
    return (fn) => this.inTransaction(fn)
  }

  get runOnce(): JobContext['runOnce'] {
    return (key, work, opts) => this.runOnceOrRetryLater(key, work, opts)
  }

  get effect(): JobContext['effect'] {
    return (key, fn) => this.inTransaction(async (tx) => {
      if (!(await this.services.effects.record(tx, key))) return 'duplicate-done' as const
      await fn(tx)
      return 'ran' as const
    })
  }

  private async inTransaction<T>(fn: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
    if (this.completion !== null) throw new Error(`pgonce: job ${this.id} was already completed by ctx.transaction; call it once per job`)
    if (this.lost) throw new LeaseLostError(this.id)
    const { pool, store, logger } = this.services
    const client = await pool.connect()
    let broken: Error | undefined
    try {
      await client.query('begin')
      try {
        const value = await fn(client)
        const outcome = await store.complete([{ id: this.id, token: this.token, resultJson: resultJson(value, logger, this.id) }], client)
        if (!outcome.completed.has(this.token)) throw new LeaseLostError(this.id)
        this.completion = { state: 'committing', result: value }
        await client.query('commit')
        this.completion.state = 'committed'
        if (outcome.childrenWaiting) {
          await store.promoteDependents([this.id], 10_000).catch((err) => logger.warn({ err }, 'pgonce: promoting dependents failed'))
        }
        return value
      } catch (err) {
        if (this.completion?.state === 'committing') this.completion = null
        await client.query('rollback').catch((e: Error) => {
          broken = e
        })
        throw err
      }
    } finally {
      client.release(broken)
    }
  }

  private async runOnceOrRetryLater(key: string, work: () => unknown, opts?: RunOnceOptions): Promise<'ran' | 'duplicate-done'> {
    const outcome = await this.services.effects.runOnce(key, work, opts)
    if (outcome !== 'duplicate-running') return outcome
    this.retryLaterMs = this.services.retryLaterMs
    throw new RetryLaterError(this.services.retryLaterMs, `pgonce: '${key}' is running elsewhere; job ${this.id} retries later`)
  }
}
