// Runs claimed jobs on the worker's handler slots: how many to claim (the free slots plus a window sized from the
// handlers' pace), the claimed jobs waiting for a slot, the handlers, and the wait for them at close.

import { LeaseLostError, handlerError } from '../errors.js'
import { Job, type JobOwner } from '../job.js'
import type { Logger } from '../logger.js'
import { RunTelemetry } from '../telemetry/run-telemetry.js'
import type { Completer } from './completer.js'
import { type ContextServices, HeldJob } from './context.js'
import type { JobContext } from './job-context.js'
import { HeldJobs } from './held-jobs.js'
import { type FetchedRow, claimedToJobRow } from './job-store.js'
import type { Leases } from './leases.js'
import { RunTimeouts } from './timeouts.js'

/** Processes one job; its return value is stored as the job's result (JSON). */
export type Handler<Data, Result> = (job: Job<Data>, ctx: JobContext) => Result | Promise<Result>

/** The window: the jobs the handlers finish, at their measured pace, within this many claim round trips. */
const WINDOW_ROUND_TRIPS = 2
/** A job of the window still without a slot after this many round trips (at least MIN_WAIT_MS) goes back. */
const GIVE_BACK_ROUND_TRIPS = 6
const MIN_WAIT_MS = 50
/** Jobs that must have finished within one sample of the pace (at most SAMPLE_MS) before it opens a window. */
const WINDOW_SAMPLE = 8
const SAMPLE_MS = 100

/**
 * A held job's states (HeldJob.phase), one machine:
 *
 *   claimed ──> ready ──(a slot; its lease fresh or renewed: leases.ts)──> running ──(handler ends)──> settling ──> gone
 *                 └──(lease lost or not renewed; waited past the bound; close)──> gone, its handler never started
 *   running ──(its timeout: the attempt failed, the slot freed)──> settling ──(the handler ends, outcome ignored)──> gone
 *
 * A worker claims only what it starts (docs/workers.md, "Fetching"): every claimed job is `active` (its attempt
 * counted) and its handler starts on a free slot at once, or, when handlers are fast, after a short wait in `ready`.
 * What a claim asks for: the free slots, plus a window of the jobs the handlers finish within WINDOW_ROUND_TRIPS claim
 * round trips at their measured pace (none for slow handlers, nor before the pace is known), at most `batchSize`. The
 * window keeps a fast drain from waiting a round trip for each few jobs; by construction its jobs wait about two
 * round trips. A wrong pace (fast jobs, then slow ones holding every slot) is bounded: a job still waiting after
 * GIVE_BACK_ROUND_TRIPS round trips (at least MIN_WAIT_MS) goes back to the queue, its run not counted, and the window
 * closes until the pace is measured again (else the worker would claim the jobs it gave back again and again).
 */
export class Runner<Data, Result> {
  /** Claimed, waiting for a slot, oldest first (`at`: when it came, for the bound). */
  private readonly ready: { h: HeldJob<Data>; at: number }[] = []
  /** Slots taken: handlers running, or about to (a lease being renewed first). */
  private running = 0
  /** Handlers that returned and whose completion is being written (their slot is free). */
  private finishing = 0
  /** Jobs the claim in flight asked for: they count as taken until it returns. */
  private reserved = 0
  private accepting = true
  private readonly pace = new Pace()
  private giveBackTimer: NodeJS.Timeout | undefined
  private readonly held: HeldJobs<Data>
  private readonly timeouts: RunTimeouts<Data, Result>

  constructor(
    private readonly handler: Handler<Data, Result>,
    private readonly concurrency: number,
    private readonly batchSize: number,
    private readonly services: ContextServices,
    private readonly leases: Leases<Data>,
    private readonly completer: Completer<Data, Result>,
    private readonly owner: JobOwner,
    private readonly reportError: (err: Error) => void,
    private readonly logger: Logger,
    /** Every job claimed and not yet settled, by lock token (a stale run and its re-claim can share a job id). */
    held: Map<string, HeldJob<Data>>,
  ) {
    this.held = new HeldJobs(held, services.store, reportError, logger)
    this.timeouts = new RunTimeouts(completer, reportError, logger)
  }

  /**
   * How many jobs the next claim asks for (0: none now): the free slots plus the window, at most `batchSize`, and at
   * most `concurrency + batchSize` held in all, not counting up to `batchSize` whose completions are being written
   * (counted in full, the next claim waited for the completion statement in flight: claims in flight 82% of a drain
   * instead of 94%, about 0.9x its speed; bench/DECISIONS.md#claims-not-waiting). With jobs already
   * waiting for a slot it waits until it wants half the window: one claim is in flight at a time, and a small one
   * would hold that turn while the window runs down. The jobs asked for count as taken until claimed() returns them.
   */
  demand(): number {
    if (!this.accepting) return 0
    const window = this.pace.finishedWithin(WINDOW_ROUND_TRIPS * this.pace.claimMs, this.batchSize)
    const waiting = this.ready.length
    const unfinished = this.held.size - Math.min(this.finishing, this.batchSize) + this.reserved
    const limit = Math.min(
      this.batchSize,
      this.concurrency + window - this.running - waiting - this.reserved,
      this.concurrency + this.batchSize - unfinished,
    )
    if (limit <= 0 || (waiting > 0 && limit < Math.ceil(window / 2))) return 0
    this.reserved += limit
    return limit
  }

  /**
   * The claim for `limit` jobs, sent at `sentAt` (performance.now()), returned `rows` after `latencyMs` (0: it failed).
   * Their handlers start on the free slots; the rest wait in `ready`.
   */
  claimed(rows: readonly FetchedRow[], limit: number, sentAt: number, latencyMs: number): void {
    this.reserved -= limit
    if (latencyMs > 0) this.pace.claimReturned(latencyMs)
    const at = performance.now()
    for (const row of rows) {
      const h = new HeldJob<Data>(row, new Job<Data>(claimedToJobRow(row), null, this.owner), this.services, sentAt)
      this.held.add(h)
      this.ready.push({ h, at })
    }
    this.fill()
    this.armGiveBack()
  }

  /** Resolves when a slot frees or a job leaves the worker: the fetcher may claim again. */
  freed(): Promise<void> {
    return this.held.freed()
  }

  /** Closing: jobs a claim still returns are held, not started, until `stop()` gives them back. */
  refuseNewStarts(): void {
    this.accepting = false
  }

  /** Stops starting jobs; those waiting for a slot go back to the queue, their run not counted. */
  async stop(): Promise<void> {
    this.accepting = false
    clearTimeout(this.giveBackTimer)
    await this.held.giveBack(this.ready.splice(0).map((r) => r.h))
  }

  /**
   * Waits up to `closeTimeoutMs` for the running handlers and their outcomes; then aborts the handlers still running
   * (their `ctx.signal`), and gives those that honour it a moment to throw, so that their jobs are released at once.
   */
  async finish(closeTimeoutMs: number): Promise<void> {
    if (await this.held.allSettled(closeTimeoutMs)) return
    this.held.abandonRunning('handlers')
    await this.held.allSettled(Math.min(1_000, Math.max(100, closeTimeoutMs / 10)))
  }

  /** Starts handlers on the free slots, oldest waiting job first. */
  private fill(): void {
    while (this.accepting && this.running < this.concurrency) {
      const h = this.ready.shift()?.h
      if (h === undefined) return
      if (h.lost) {
        this.notRun(h)
        continue
      }
      this.running++
      h.phase = 'running'
      void this.execute(h)
    }
  }

  private async execute(h: HeldJob<Data>): Promise<void> {
    if (this.leases.stale(h) && !((await this.leases.renewBeforeStart(h)) && this.accepting)) {
      this.running--
      if (h.lost || !this.accepting) this.notRun(h)
      else this.held.settled(h)
      this.fill()
      return
    }
    const run = new RunTelemetry(h.row.queue, {
      id: h.id,
      name: h.row.name,
      attempts: h.job.attempts,
      runAtMs: h.row.run_at_ms,
      traceContext: h.row.trace_context,
    })
    let result: Result | undefined
    let err: Error | undefined
    // At the deadline (timeouts.ts) the attempt is failed, and the slot frees once that is recorded, as after a throw:
    // the handler is no longer counted in `concurrency`, but its job stays held until it ends.
    const timer = this.timeouts.arm(h, run, () => {
      this.pace.jobFinished()
      this.running--
      this.fill()
      this.held.notifyFreed()
    })
    this.leases.watch(h)
    try {
      result = await run.within(() => this.handler(h.job, h))
    } catch (thrown) {
      err = handlerError(thrown)
    }
    clearTimeout(timer)
    if (h.timedOut !== null) {
      this.timeouts.endedAfterTimeout(h, err)
      return this.held.settled(h)
    }
    run.end(err)
    this.pace.jobFinished()
    h.phase = 'settling'
    if (err === undefined) {
      // The slot frees at once: the completion is written in the background, batched.
      this.running--
      this.finishing++
      this.fill()
      this.held.notifyFreed()
      await this.completer.succeeded(h, result as Result).catch(this.reportError)
      this.finishing--
    } else {
      // The slot frees once the failure is recorded, so that the claim it prompts finds the job back in the queue.
      await this.completer.threw(h, err).catch(this.reportError)
      this.running--
      this.fill()
    }
    this.held.settled(h)
  }

  /** A job whose handler will not start: lost (reported), or given back while closing. */
  private notRun(h: HeldJob<Data>): void {
    if (!h.lost) return void this.held.giveBack([h])
    this.logger.warn({ jobId: h.id }, 'pgonce: lease lost before the handler started; the job is not run here')
    this.reportError(new LeaseLostError(h.id))
    this.held.settled(h)
  }

  /** The bound on a wait for a slot: a timer at the oldest waiting job's deadline. */
  private armGiveBack(): void {
    const head = this.ready[0]
    if (this.giveBackTimer !== undefined || head === undefined || !this.accepting) return
    const bound = Math.max(MIN_WAIT_MS, GIVE_BACK_ROUND_TRIPS * this.pace.claimMs)
    this.giveBackTimer = setTimeout(
      () => {
        this.giveBackTimer = undefined
        const now = performance.now()
        const late = this.ready.findIndex((r) => now - r.at < bound)
        const expired = this.ready.splice(0, late < 0 ? this.ready.length : late).map((r) => r.h)
        if (expired.length > 0) {
          this.pace.wasWrong()
          void this.held.giveBack(expired)
        }
        this.armGiveBack()
      },
      Math.max(0, head.at + bound - performance.now()),
    )
  }
}

/**
 * The handlers' finishing rate and the claim latency (moving averages, the newest sample weighing half), from which the
 * window is sized. A sample of the rate closes when WINDOW_SAMPLE jobs have finished or SAMPLE_MS have passed; the
 * window is open only while the last one counted WINDOW_SAMPLE jobs (one fast job says little, and a window opened on
 * it makes the next jobs wait behind a slow handler).
 */
class Pace {
  /** Mean claim latency, ms (0 until a claim returned). */
  claimMs = 0
  private jobsPerMs = 0
  private finished = 0
  private since = performance.now()
  private open = false

  /** A handler returned or threw. */
  jobFinished(): void {
    this.finished++
  }

  /** Jobs of the window waited past the bound: the window stays closed until a new sample opens it. */
  wasWrong(): void {
    this.open = false
    this.jobsPerMs = 0
    this.finished = 0
    this.since = performance.now()
  }

  /** A claim came back after `latencyMs`. */
  claimReturned(latencyMs: number): void {
    this.claimMs = this.claimMs === 0 ? latencyMs : (latencyMs + this.claimMs) / 2
  }

  /** Jobs the handlers finish, at their pace, within `ms` (rounded down, at most `max`); 0 while the window is closed. */
  finishedWithin(ms: number, max: number): number {
    const now = performance.now()
    if (this.finished >= WINDOW_SAMPLE || now - this.since >= SAMPLE_MS) {
      const rate = this.finished / Math.max(now - this.since, 0.001)
      this.jobsPerMs = this.jobsPerMs === 0 ? rate : (rate + this.jobsPerMs) / 2
      this.open = this.finished >= WINDOW_SAMPLE
      this.finished = 0
      this.since = now
    }
    return this.open ? Math.min(max, Math.floor(this.jobsPerMs * ms)) : 0
  }
}
