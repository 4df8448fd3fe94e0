// Writes how each run ended, fenced by its lock token: completions batched, failed attempts (retried after a backoff or
// failed for good), runs given back for later, lost leases; counts the outcomes and emits the Worker's events.

import type { EventEmitter } from 'node:events'
import { Counters } from '../counters.js'
import { isConnectionError } from '../db/checkout.js'
import { LeaseLostError, RetryLaterError } from '../errors.js'
import { type Backoff, Job, type JobOwner, type JobState } from '../job.js'
import type { Logger } from '../logger.js'
import { countInto } from '../telemetry/metrics.js'
import { MAX_DURATION_MS } from '../validate.js'
import { type HeldJob, resultJson } from './context.js'
import type { Completion, JobStore } from './job-store.js'
import type { WorkerEvents } from './worker.js'

/**
 * How a run ended, as `worker.runOutcomes` counts it: completed; failed (for good) or retried (an attempt failed, one
 * is left); cancelled; rescheduled (RetryLaterError, ctx.runOnce finding the work running elsewhere, or given back at
 * close: the attempt not counted); lease-lost (nothing of the run was recorded).
 */
export type RunOutcome = 'completed' | 'failed' | 'retried' | 'cancelled' | 'rescheduled' | 'lease-lost'

/** How a completion ended: 'completed', 'cancelled' (requested meanwhile), or null (lease lost, or stopped first). */
type CompletionEnd = Extract<JobState, 'completed' | 'cancelled'> | null

interface PendingCompletion {
  completion: Completion
  settle: (end: CompletionEnd) => void
}

/** Items per completion statement at most. */
const MAX_BATCH = 2_000
/** Longest pause between retries of a completion statement that failed (database unreachable). */
const MAX_RETRY_MS = 5_000

/**
 * Completions wait for the WAL flush (a completion must survive a crash), so while one statement is in flight the
 * next ones gather: one statement per turn of the event loop at most, the flushes shared by many jobs. A statement
 * that failed is retried with backoff, first checked by token (the earlier attempt may have committed before its
 * answer was lost). A failed attempt or a give-back is one statement of its own: they are rare.
 */
export class Completer<Data, Result> {
  /** How runs ended, also fed to the OpenTelemetry counter pgonce.jobs.runs. */
  readonly outcomes: Counters<RunOutcome>
  private pending: PendingCompletion[] = []
  private completing = false
  private stopped = false

  constructor(
    private readonly store: JobStore,
    private readonly events: EventEmitter<WorkerEvents<Data, Result>>,
    private readonly owner: JobOwner,
    private readonly reportError: (err: Error) => void,
    private readonly logger: Logger,
    queue: string,
    /** Called after a completion statement of a queue with limits: it freed slots a claim may now take. */
    private readonly freedSlots: () => void = () => {},
  ) {
    this.outcomes = new Counters<RunOutcome>(countInto('runs', queue))
  }

  /** The handler returned `result`. */
  async succeeded(h: HeldJob<Data>, result: Result): Promise<void> {
    if (this.stopped) return this.tooLate(h)
    if (h.completion?.state === 'committed') return this.ended(h, h.completion.ended, h.completion.result as Result)
    if (h.retryLaterMs !== null) return this.releaseLater(h, h.retryLaterMs)
    if (h.lost) return this.leaseLost(h, 'its handler returned')
    const end = await this.complete({ id: h.id, token: h.token, resultJson: resultJson(result, this.logger, h.id) })
    if (end !== null) return this.ended(h, end, result)
    if (this.stopped) return
    // Refused as past the run's deadline (the handler returned just before it, the completion reached the database
    // after): the attempt failed by timeout, recorded as the timer would have.
    const timedOut = h.pastDeadline()
    if (timedOut !== null) return this.threw(h, timedOut)
    this.leaseLost(h, 'its handler returned')
  }

  /** The handler threw `err`. */
  async threw(h: HeldJob<Data>, err: Error): Promise<void> {
    if (this.stopped) return this.tooLate(h)
    if (h.completion?.state === 'committed') {
      this.logger.warn(
        { err, jobId: h.id },
        'pgonce: handler threw after ctx.transaction completed its job; the job stays completed',
      )
      return this.ended(h, h.completion.ended, h.completion.result as Result)
    }
    if (err instanceof RetryLaterError || h.retryLaterMs !== null) {
      return this.releaseLater(h, h.retryLaterMs ?? (err as RetryLaterError).delayMs)
    }
    if (h.abandoned) return this.releaseLater(h, 0)
    if (h.lost) return this.leaseLost(h, 'its handler threw')
    const row = await this.store.fail(
      h.id,
      h.token,
      storableText(err.message || String(err)),
      err.stack === undefined ? null : storableText(err.stack),
      retryDelayMs(h.job.backoff, h.job.attempts),
    )
    if (row === null) return this.leaseLost(h, 'its handler threw')
    this.logger.debug({ jobId: h.id, state: row.state, err }, 'pgonce: attempt failed')
    const job = new Job<Data>(row, null, this.owner)
    if (row.state === 'cancelled') {
      this.outcomes.increment('cancelled')
      this.events.emit('cancelled', job)
      return
    }
    this.outcomes.increment(row.state === 'failed' ? 'failed' : 'retried')
    this.events.emit('failed', job, err)
  }

  /** Nothing more is written: completions not sent yet resolve as unknown (their jobs are rescued after the lease). */
  stop(): void {
    this.stopped = true
    for (const p of this.pending.splice(0)) p.settle(null)
  }

  /** Puts the job back for `delayMs` without counting the run. */
  private async releaseLater(h: HeldJob<Data>, delayMs: number): Promise<void> {
    const count = await this.store.release([h.id], [h.token], delayMs)
    if (count === 0) return this.leaseLost(h, 'it was to be rescheduled')
    this.logger.debug({ jobId: h.id, delayMs }, 'pgonce: job rescheduled, attempt not counted')
    this.outcomes.increment('rescheduled')
  }

  private ended(h: HeldJob<Data>, end: 'completed' | 'cancelled', result: Result): void {
    this.outcomes.increment(end)
    if (end === 'cancelled') this.events.emit('cancelled', h.job)
    else this.events.emit('completed', h.job, result)
  }

  private tooLate(h: HeldJob<Data>): void {
    this.logger.warn(
      { jobId: h.id },
      'pgonce: handler finished after close(); its job stays active until its lease expires and is rescued',
    )
  }

  private leaseLost(h: HeldJob<Data>, when: string): void {
    this.logger.warn({ jobId: h.id, when }, 'pgonce: lease lost; the outcome of this run was not recorded')
    this.outcomes.increment('lease-lost')
    this.reportError(new LeaseLostError(h.id))
  }

  /** Queues a completion; resolves once it is recorded (or known lost). */
  private complete(completion: Completion): Promise<CompletionEnd> {
    return new Promise((settle) => {
      this.pending.push({ completion, settle })
      if (!this.completing) {
        this.completing = true
        // After the current macrotask, so that every handler finishing in it shares one statement.
        setImmediate(() => void this.flush())
      }
    })
  }

  private async flush(): Promise<void> {
    let retryMs = 100
    let unsure = false
    while (this.pending.length > 0 && !this.stopped) {
      const batch = this.pending.slice(0, MAX_BATCH)
      try {
        // After a failure whose answer may have been lost, the earlier attempt may have committed: ask first.
        const recorded = unsure
          ? await this.store.recorded(
              batch.map((p) => p.completion.id),
              batch.map((p) => p.completion.token),
            )
          : new Map<string, JobState>()
        const todo = batch.filter((p) => !recorded.has(p.completion.token))
        const changed =
          todo.length > 0 ? await this.store.complete(todo.map((p) => p.completion)) : new Map<string, JobState>()
        this.pending.splice(0, batch.length)
        retryMs = 100
        unsure = false
        if (changed.size > 0 && this.store.claimsLimited) this.freedSlots()
        for (const p of batch) p.settle(endOf(recorded.get(p.completion.token) ?? changed.get(p.completion.token)))
      } catch (err) {
        if (this.stopped) break
        if (isDataError(err)) {
          // One result the database refuses (e.g. a lone surrogate in a string) must not hold back the others.
          await this.completeOneByOne(batch)
          this.pending.splice(0, batch.length)
          continue
        }
        unsure ||= isConnectionError(err)
        this.reportError(err as Error)
        await new Promise((resolve) => setTimeout(resolve, retryMs))
        retryMs = Math.min(retryMs * 2, MAX_RETRY_MS)
      }
    }
    this.completing = false
  }

  private async completeOneByOne(batch: PendingCompletion[]): Promise<void> {
    for (const p of batch) {
      let completion = p.completion
      for (;;) {
        try {
          p.settle(endOf((await this.store.complete([completion])).get(completion.token)))
          break
        } catch (err) {
          if (!isDataError(err) || completion.resultJson === null) {
            this.reportError(err as Error)
            p.settle(null)
            break
          }
          this.logger.warn(
            { err, jobId: completion.id },
            'pgonce: the database refused the handler result; stored as null',
          )
          completion = { ...completion, resultJson: null }
        }
      }
    }
  }
}

/**
 * Milliseconds to wait before the next attempt after `attemptsMade` runs. Exponential doubles `delay` per attempt made
 * (delay, 2·delay, 4·delay, …); `jitter` (default 0 for fixed, 0.5 for exponential) randomly takes up to that share off
 * each delay, so that jobs failing together do not retry in lockstep. The database adds the result to its own clock.
 */
export function retryDelayMs(
  backoff: Backoff | null,
  attemptsMade: number,
  random: () => number = Math.random,
): number {
  if (backoff === null || backoff.delay <= 0) return 0
  const base =
    backoff.type === 'exponential' ? backoff.delay * 2 ** Math.max(0, Math.min(attemptsMade - 1, 52)) : backoff.delay
  const jitter = backoff.jitter ?? (backoff.type === 'exponential' ? 0.5 : 0)
  return Math.round(Math.min(MAX_DURATION_MS, base) * (1 - jitter * random()))
}

function endOf(state: JobState | undefined): CompletionEnd {
  return state === 'completed' || state === 'cancelled' ? state : null
}

/** SQLSTATE class 22: the data, not the connection, is at fault; retrying the same statement cannot help. */
function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code
  return typeof code === 'string' && code.startsWith('22')
}

/** Postgres text cannot hold NUL characters. */
function storableText(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\\0') : text
}
