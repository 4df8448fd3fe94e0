// Keeps the leases of a worker's held jobs alive (heartbeats), renews a job's lease before its handler starts when it
// may have run out, and tells handlers when a lease is lost or their job cancelled.

import { JobCancelledError, LeaseLostError } from '../errors.js'
import type { Logger } from '../logger.js'
import type { HeldJob } from './context.js'
import type { JobStore } from './job-store.js'

/**
 * A lease runs out `leaseMs` after the database's now() in the statement that set it, which comes after that statement
 * was sent: by this process's monotonic clock it lasts at least until `leaseFrom + leaseMs` (HeldJob.leaseFrom). That
 * clock runs on while the process is stopped (SIGSTOP, a long garbage collection, a paused VM), so a worker resumed
 * past its lease sees it. Before a handler starts, a job whose lease is more than half spent is renewed first, fenced
 * by its token, and dropped (never run) if another worker may have taken it over (renewBeforeStart). While a handler
 * runs, its lease is lost at `leaseFrom + leaseMs` unless a heartbeat acknowledged since moved it on: a worker cut off
 * from the database (or whose heartbeats go unanswered) aborts the handler's `ctx.signal` then, before the rescue can
 * hand the job to another worker (expire()), not when a heartbeat gets through after the heal.
 */
export class Leases<Data> {
  private timer: NodeJS.Timeout | undefined
  private beating = false
  /** The timer at the earliest end of a running handler's lease (expire()), and that end. */
  private expiry: NodeJS.Timeout | undefined
  private expiryAt = Infinity

  constructor(
    private readonly store: JobStore,
    private readonly held: ReadonlyMap<string, HeldJob<Data>>,
    private readonly leaseMs: number,
    private readonly heartbeatMs: number,
    private readonly reportError: (err: Error) => void,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.beat(), this.heartbeatMs)
  }

  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
    clearTimeout(this.expiry)
    this.expiry = undefined
    this.expiryAt = Infinity
  }

  /** `h`'s handler starts: from now on its lease is watched by this process's clock (expire()). */
  watch(h: HeldJob<Data>): void {
    h.watched = true
    this.expireAt(h.leaseFrom + this.leaseMs)
  }

  /** Arms the expiry timer at `at` unless it fires earlier already. */
  private expireAt(at: number): void {
    if (at >= this.expiryAt) return
    clearTimeout(this.expiry)
    this.expiryAt = at
    this.expiry = setTimeout(() => this.expire(), Math.max(0, at - performance.now()))
    this.expiry.unref()
  }

  /**
   * The leases of running handlers that ran out by this process's clock are lost: the database may hand their jobs to
   * another worker from now on. Their `ctx.signal` aborts with LeaseLostError, and nothing more is written for them.
   * Not when the run's outcome is decided already (settling, a ctx.transaction committing the completion, close()
   * gave up on it). Then the timer waits for the next end.
   */
  private expire(): void {
    this.expiry = undefined
    this.expiryAt = Infinity
    const now = performance.now()
    let next = Infinity
    for (const h of this.held.values()) {
      if (!h.watched || h.lost || h.phase !== 'running' || h.completion !== null || h.abandoned) continue
      const end = h.leaseFrom + this.leaseMs
      // A timer may fire up to 1 ms before its time (libuv counts whole milliseconds): within 1 ms, it is the end.
      if (end - now < 1) this.lose(h, "its lease ran out by this process's clock, no heartbeat acknowledged in time")
      else next = Math.min(next, end)
    }
    if (next < Infinity) this.expireAt(next)
  }

  /** Extends the lease of every held job (waiting for a slot or running) whose outcome is not being written. */
  async beat(): Promise<void> {
    if (this.beating) return
    const sent = [...this.held.values()].filter(
      (h) => !h.lost && h.completion === null && !h.abandoned && h.phase !== 'settling',
    )
    if (sent.length === 0) return
    this.beating = true
    const sentAt = performance.now()
    try {
      const alive = await this.store.heartbeat(
        sent.map((h) => h.id),
        sent.map((h) => h.token),
      )
      for (const h of sent) this.learned(h, alive.get(h.token), sentAt)
    } catch (err) {
      this.reportError(err as Error)
    } finally {
      this.beating = false
    }
  }

  /** Whether `h`'s lease may be near its end by this process's clock: more than half of it spent. */
  stale(h: HeldJob<Data>): boolean {
    return performance.now() - h.leaseFrom >= this.leaseMs / 2
  }

  /**
   * Renews a stale lease before the job's handler starts: true once the lease is fresh, false if the job must not run
   * (taken over, or the renewal failed; the job is then left to the lease rescue). Asked again until fresh: the process
   * may have stopped again while the renewal was in flight.
   */
  async renewBeforeStart(h: HeldJob<Data>): Promise<boolean> {
    while (this.stale(h)) {
      const sentAt = performance.now()
      let cancelRequested: boolean | undefined
      try {
        cancelRequested = (await this.store.heartbeat([h.id], [h.token])).get(h.token)
      } catch (err) {
        this.reportError(err as Error)
        return false
      }
      this.learned(h, cancelRequested, sentAt)
      if (h.lost) return false
    }
    return true
  }

  /** What a heartbeat sent at `sentAt` said of one job: `cancelRequested` for a lease still held, undefined for a lost one. */
  private learned(h: HeldJob<Data>, cancelRequested: boolean | undefined, sentAt: number): void {
    // Settled, settling (its own statement decides) or completed by ctx.transaction meanwhile: not lost.
    if (!this.held.has(h.token) || h.phase === 'settling' || h.completion !== null) return
    if (cancelRequested === undefined) return this.lose(h, 'taken over after it expired, or changed by hand')
    h.leaseFrom = Math.max(h.leaseFrom, sentAt)
    if (cancelRequested && !h.cancelRequested) {
      h.cancelRequested = true
      h.abort(new JobCancelledError(h.id))
      this.logger.info({ jobId: h.id }, 'pgonce: job cancelled while running; its handler is aborted')
    }
  }

  /** Marks `h`'s lease lost (once) and aborts its `ctx.signal` with LeaseLostError. */
  private lose(h: HeldJob<Data>, why: string): void {
    if (h.lost) return
    h.lost = true
    h.abort(new LeaseLostError(h.id))
    this.logger.warn({ jobId: h.id, phase: h.phase }, `pgonce: lease lost (${why})`)
  }
}
