// Batch handlers' public shape: the `batch` option and its checks, the handler's type, its `ctx`, and how what it
// returned becomes one outcome per job (docs/workers.md, "Batch handlers").

import { handlerError } from '../errors.js'
import type { Job } from '../job.js'
import type { Logger } from '../logger.js'
import { MAX_TIMER_MS } from '../db/connection.js'
import { checkInteger, checkOptions, fail } from '../validate.js'
import type { HeldJob } from './context.js'
import type { JobContext } from './job-context.js'

/** The `batch` option of a Worker: its handler gets up to `size` jobs at once. */
export interface BatchOptions {
  /** Most jobs in one batch; one claim asks for at most this many. (Required, 1 to 10000) */
  size: number
  /**
   * When a claim returns fewer than `size` jobs: how long, in ms, the worker waits for more due jobs (woken by NOTIFY
   * or its polls) before it runs the batch it has. The jobs already claimed keep their leases meanwhile. 0 runs what
   * one claim returned at once. (Default: 0)
   */
  waitMs?: number
}

/** `batch` with its default filled in. */
export type ResolvedBatchOptions = Required<BatchOptions>

/** What a batch handler says of one job: a value completes it (stored as its result), an `Error` fails its attempt. */
export type BatchOutcome<Result> = Result | Error

/**
 * Processes a batch. Return nothing (every job completes with result null), or an array aligned with `jobs` whose
 * items are outcomes or promises of outcomes (a rejected promise fails that job's attempt). A throw fails the attempt
 * of every job of the batch.
 */
export type BatchHandler<Data, Result> = (
  jobs: Job<Data>[],
  ctx: BatchContext<Data>,
) => BatchReturn<Result> | Promise<BatchReturn<Result>>

/** What a batch handler returns. */
export type BatchReturn<Result> = readonly (BatchOutcome<Result> | Promise<BatchOutcome<Result>>)[] | void | undefined

/** What a batch handler gets besides its jobs. */
export interface BatchContext<Data = unknown> {
  /**
   * Aborts when `close()` stops waiting for the batch, or once every job of the batch timed out (with the
   * `JobTimeoutError` of the last). A job's own lease loss, cancellation or timeout: `ctx.for(job).signal`.
   */
  readonly signal: AbortSignal
  /**
   * The context of one job of the batch, as a single-job handler gets it: its own `signal` (lease lost, cancelled, timed out),
   * `effect` and `runOnce` recorded for that job, `transaction` completing that job, `updateProgress`, `logger`.
   */
  for(job: Job<Data>): JobContext
  /** The worker's logger, bound to this batch (`jobs`: how many). */
  readonly logger: Logger
}

/** Checks the `batch` option before any I/O; null when absent. */
export function checkBatchOptions(value: unknown, field: string): ResolvedBatchOptions | null {
  if (value === undefined) return null
  const o = checkOptions<BatchOptions>(value, field, ['size', 'waitMs'])
  if (o.size === undefined) fail('REQUIRED', `${field}.size`, 'is required')
  return {
    size: checkInteger(o.size, `${field}.size`, 1, 10_000),
    waitMs: o.waitMs === undefined ? 0 : checkInteger(o.waitMs, `${field}.waitMs`, 0, MAX_TIMER_MS),
  }
}

/** One running batch's `ctx`. */
export class BatchRun<Data> implements BatchContext<Data> {
  readonly #byId: Map<string, HeldJob<Data>>
  readonly #controller = new AbortController()
  readonly #logger: Logger

  constructor(held: readonly HeldJob<Data>[], logger: Logger) {
    this.#byId = new Map(held.map((h) => [h.id, h]))
    this.#logger = logger.child({ jobs: held.length })
  }

  get signal(): AbortSignal {
    return this.#controller.signal
  }

  get logger(): Logger {
    return this.#logger
  }

  /** What a logger or JSON.stringify shows of `ctx`: the jobs of the batch. */
  toJSON(): { jobIds: string[]; aborted: boolean } {
    return { jobIds: [...this.#byId.keys()], aborted: this.#controller.signal.aborted }
  }

  for(job: Job<Data>): JobContext {
    const h = this.#byId.get((job as { id?: unknown } | null)?.id as string)
    if (h === undefined) throw new TypeError('pgonce: ctx.for(job): the job is not one of this batch')
    return h
  }

  abort(reason: Error): void {
    this.#controller.abort(reason)
  }
}

/** Per job: the value it completes with, or the error that fails its attempt. */
export type Settled<Result> = { ok: true; value: Result } | { ok: false; err: Error }

/**
 * Turns what a batch handler returned into one outcome per job, waiting for the promises it holds, except that an
 * item still pending when `left[i]` resolves (its job timed out) is left, failed with that error: a hanging item holds
 * back the other jobs of the batch no longer than its job's timeout. A return of the wrong shape (not an array, or not
 * one item per job) fails every job's attempt, with an error saying so.
 */
export async function settleOutcomes<Result>(
  returned: BatchReturn<Result>,
  jobs: number,
  left: readonly (Promise<Error> | undefined)[] = [],
): Promise<Settled<Result>[]> {
  if (returned === undefined || returned === null) {
    return Array.from({ length: jobs }, () => ({ ok: true, value: null as Result }))
  }
  if (!Array.isArray(returned) || returned.length !== jobs) {
    const got = Array.isArray(returned) ? `an array of ${returned.length}` : typeof returned
    const err = new TypeError(
      `pgonce: a batch handler returns undefined or an array with one outcome per job (${jobs}); got ${got}`,
    )
    return Array.from({ length: jobs }, () => ({ ok: false, err }))
  }
  const items = await Promise.allSettled(
    (returned as readonly (BatchOutcome<Result> | Promise<BatchOutcome<Result>>)[]).map((item, i) => {
      const until = left[i]
      if (until === undefined) return Promise.resolve(item)
      // Promise.race handles a rejection of the item that comes after it was left: no unhandled rejection.
      return Promise.race([item, until.then((err) => Promise.reject(err))])
    }),
  )
  return items.map((item) => {
    if (item.status === 'rejected') return { ok: false, err: handlerError(item.reason) }
    if (item.value instanceof Error) return { ok: false, err: item.value }
    return { ok: true, value: item.value }
  })
}
