// Batches a worker's steps: the completions of finished handlers and the starts of claimed-ahead jobs, one statement per turn of the event loop.

import { isConnectionError } from '../db/checkout.js'
import type { JobState } from '../job.js'
import type { Logger } from '../logger.js'
import type { Completion, JobStore } from './job-store.js'

/** How a completion ended: 'completed', 'cancelled' (cancellation was requested meanwhile), or null (lease lost, or the worker stopped first). */
export type CompletionEnd = Extract<JobState, 'completed' | 'cancelled'> | null

interface PendingCompletion {
  completion: Completion
  settle: (end: CompletionEnd) => void
}

interface PendingStart {
  id: string
  token: string
  /** The run count once started; null: it must not run (gone, superseded, cancelled, or taken over). */
  settle: (attempts: number | null) => void
}

/**
 * Start statements in flight at once. With one, fast handlers split into two groups that alternate: the starts of the
 * jobs that finished while a start was in flight waited for it, so each statement carried about half the slots (9.6
 * starts per statement at concurrency 16). With two: 15.8 per statement, and a 100,000-job drain of no-op handlers at
 * 14,479 / 14,567 jobs/s against 11,752 / 12,903 with one (alternated pairs, 2-core VM, dev/drain-probe.ts).
 */
const START_LANES = 2
/** Items per statement at most. */
const MAX_BATCH = 2_000
/** Longest pause between retries of a step that failed (database unreachable). */
const MAX_RETRY_MS = 5_000

/**
 * Two lanes, each batching what is asked for meanwhile: starts (up to START_LANES statements in flight) and
 * completions (one in flight). Starts go out every turn of the event loop and commit without waiting for the WAL
 * flush: a slot must not idle. Completions wait for the flush (a
 * completion must survive a crash), so while one is in flight the next ones gather: the flushes are shared by many jobs.
 * A completion step that failed is retried with backoff, first checked by token (the earlier attempt may have committed
 * before its answer was lost); starts whose step lost its connection are given up (their jobs' leases run out and the
 * rescue puts them back: a job must never run twice).
 */
export class StepBatcher {
  private completions: PendingCompletion[] = []
  private starts: PendingStart[] = []
  private completing = false
  private startsInFlight = 0
  private startPlanned = false
  private startRetryMs = 100
  /** Mean latency of the start statements (moving average, ms; 0 until one returned). */
  startMs = 0
  /** Set by stop(): nothing more is written. */
  stopped = false

  constructor(
    private readonly store: JobStore,
    private readonly onError: (err: Error) => void,
    private readonly logger: Logger,
  ) {}

  /** Queues a finished job's completion; resolves once it is recorded (or known lost). Only jobs whose handler returned come here. */
  complete(completion: Completion): Promise<CompletionEnd> {
    if (this.stopped) return Promise.resolve(null)
    return new Promise((settle) => {
      this.completions.push({ completion, settle })
      if (!this.completing) {
        this.completing = true
        // After the current macrotask, so that every handler finishing in it shares one statement.
        setImmediate(() => void this.flushCompletions())
      }
    })
  }

  /** Queues the start of a claimed-ahead job; resolves to its run count, or null if it must not run. */
  start(id: string, token: string): Promise<number | null> {
    if (this.stopped) return Promise.resolve(null)
    return new Promise((settle) => {
      this.starts.push({ id, token, settle })
      this.scheduleStarts()
    })
  }

  /** Sends the queued starts on the next turn of the event loop, unless that is planned or both start lanes are busy. */
  private scheduleStarts(): void {
    if (this.startPlanned || this.startsInFlight >= START_LANES || this.starts.length === 0) return
    this.startPlanned = true
    setImmediate(() => {
      this.startPlanned = false
      void this.flushStarts()
    })
  }

  /** Gives up on what is not written yet: completions resolve null (their jobs are rescued after the lease), starts null. */
  stop(): void {
    this.stopped = true
    for (const p of this.completions.splice(0)) p.settle(null)
    for (const p of this.starts.splice(0)) p.settle(null)
  }

  /** One start statement for what is queued now; a failure that did not lose the connection puts it back, with backoff. */
  private async flushStarts(): Promise<void> {
    if (this.stopped || this.starts.length === 0) return
    const batch = this.starts.splice(0, MAX_BATCH)
    this.startsInFlight++
    const sent = performance.now()
    try {
      const changed = await this.store.start(batch)
      const ms = performance.now() - sent
      this.startMs = this.startMs === 0 ? ms : (ms + this.startMs) / 2
      this.startRetryMs = 100
      for (const p of batch) p.settle(changed.get(p.token)?.attempts ?? null)
    } catch (err) {
      if (this.stopped) {
        for (const p of batch) p.settle(null)
        return
      }
      this.onError(err as Error)
      // Lost with the connection, the step may have committed: those jobs are given up. Refused, it did not: again.
      if (isConnectionError(err)) for (const p of batch) p.settle(null)
      else {
        this.starts.unshift(...batch)
        await new Promise((resolve) => setTimeout(resolve, this.startRetryMs))
        this.startRetryMs = Math.min(this.startRetryMs * 2, MAX_RETRY_MS)
      }
    } finally {
      this.startsInFlight--
      this.scheduleStarts()
    }
  }

  private async flushCompletions(): Promise<void> {
    let retryMs = 100
    let unsure = false
    while (this.completions.length > 0 && !this.stopped) {
      const batch = this.completions.slice(0, MAX_BATCH)
      try {
        // After a failure whose answer may have been lost, the earlier attempt may have committed: ask first.
        const recorded = unsure ? await this.alreadyRecorded(batch) : new Map<string, JobState>()
        const todo = batch.filter((p) => !recorded.has(p.completion.token))
        const changed = todo.length > 0 ? await this.store.complete(todo.map((p) => p.completion)) : new Map()
        this.completions.splice(0, batch.length)
        retryMs = 100
        unsure = false
        for (const p of batch) p.settle(endOf(recorded.get(p.completion.token) ?? changed.get(p.completion.token)?.state))
      } catch (err) {
        if (this.stopped) break
        if (isDataError(err)) {
          // One result the database refuses (e.g. a lone surrogate in a string) must not hold back the others.
          await this.completeOneByOne(batch)
          this.completions.splice(0, batch.length)
          continue
        }
        unsure ||= isConnectionError(err)
        this.onError(err as Error)
        await new Promise((resolve) => setTimeout(resolve, retryMs))
        retryMs = Math.min(retryMs * 2, MAX_RETRY_MS)
      }
    }
    this.completing = false
  }

  private alreadyRecorded(batch: PendingCompletion[]): Promise<Map<string, JobState>> {
    return this.store.recorded(batch.map((p) => p.completion.id), batch.map((p) => p.completion.token))
  }

  private async completeOneByOne(batch: PendingCompletion[]): Promise<void> {
    for (const p of batch) {
      let completion = p.completion
      for (;;) {
        try {
          p.settle(endOf((await this.store.complete([completion])).get(completion.token)?.state))
          break
        } catch (err) {
          if (!isDataError(err) || completion.resultJson === null) {
            this.onError(err as Error)
            p.settle(null)
            break
          }
          this.logger.warn({ err, jobId: completion.id }, 'pgonce: the database refused the handler result; stored as null')
          completion = { ...completion, resultJson: null }
        }
      }
    }
  }
}

function endOf(state: JobState | undefined): CompletionEnd {
  return state === 'completed' || state === 'cancelled' ? state : null
}

/** SQLSTATE class 22: the data, not the connection, is at fault; retrying the same statement cannot help. */
function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code
  return typeof code === 'string' && code.startsWith('22')
}
