// How many jobs to claim ahead: enough to cover two claim round trips at the pace handlers are finishing.

const SMOOTHING = 0.5
/**
 * Jobs that must have finished in the last measured interval before the pace opens a start window: one fast job (a
 * leftover, a retry) says little, and a window opened on it makes the next jobs wait behind a slow handler.
 */
const WINDOW_SAMPLE = 8

/**
 * Tracks the handlers' finishing rate and the claim latency (moving averages).
 * Prefetch = rate × latency × 2: fast jobs get large batches, so the buffer never
 * runs dry while a claim is in flight; slow jobs get one job ahead, so that
 * a worker does not sit on work that an idle peer could start.
 */
export class Pace {
  private jobsPerMs = 0
  private claimMs = 0
  private finished = 0
  private since = performance.now()
  /** Jobs finished in the last interval measured while busy. */
  private lastSample = 0

  /** Mean claim latency, ms (0 until a claim returned). */
  get claimLatencyMs(): number {
    return this.claimMs
  }

  /** A handler returned or threw. */
  jobFinished(): void {
    this.finished++
  }

  /** A claim came back after `latencyMs`; `busy` is false when the worker was idle (the rate then says nothing). */
  claimReturned(latencyMs: number, busy: boolean): void {
    const now = performance.now()
    this.claimMs = this.claimMs === 0 ? latencyMs : SMOOTHING * latencyMs + (1 - SMOOTHING) * this.claimMs
    const elapsed = now - this.since
    if (busy && elapsed > 0) {
      this.lastSample = this.finished
      const rate = this.finished / elapsed
      this.jobsPerMs = this.jobsPerMs === 0 ? rate : SMOOTHING * rate + (1 - SMOOTHING) * this.jobsPerMs
    }
    this.finished = 0
    this.since = now
  }

  /**
   * Jobs the handlers finish, at their current pace, within `ms` (rounded down, at most `max`): how many jobs the
   * worker may start ahead of a free slot while each of them still waits no longer than `ms` for one. 0 unless at
   * least WINDOW_SAMPLE jobs finished in the last interval measured.
   */
  finishedWithin(ms: number, max: number): number {
    if (this.lastSample < WINDOW_SAMPLE) return 0
    return Math.min(max, Math.floor(this.jobsPerMs * ms))
  }

  /** Jobs worth holding beyond the free slots: at least one, at most `max`. */
  prefetch(max: number): number {
    return Math.min(max, Math.max(1, Math.ceil(this.jobsPerMs * this.claimMs * 2)))
  }
}
