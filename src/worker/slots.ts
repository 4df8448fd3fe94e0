// A worker's handler slots: how many are free, how many jobs it may start ahead of them (the start window), and what
// to claim next. JobRunner moves jobs between its queues; this file owns the arithmetic over them.

import type { Demand } from './fetcher.js'
import { Pace } from './pace.js'

/** The start window: the jobs the handlers finish, at their pace, within this many round trips (see Slots). */
const WINDOW_ROUND_TRIPS = 3
/** A job started ahead that had no slot after this many round trips (or MIN_AHEAD_MS) is given back. */
const GIVE_BACK_ROUND_TRIPS = 6
const MIN_AHEAD_MS = 50 // the least a job started ahead may wait for a slot

/** What JobRunner holds, as the counts Slots reads. */
export interface HeldCounts {
  /** Claimed ahead (state 'claimed'), waiting for a start. */
  readonly buffered: number
  /** Started, waiting for a free slot (the start window). */
  readonly ready: number
  /** Every job claimed and not yet settled. */
  readonly held: number
  /** Of those, the jobs whose handler has ended and whose outcome is being written. */
  readonly finishing: number
  /** False once the worker is closing. */
  readonly accepting: boolean
}

/**
 * Slots: `concurrency` handlers run at once. A slot is taken by a running handler, a start in flight, a started job
 * waiting in `ready`, or a claim in flight that will start jobs (`reserved`).
 *
 * The start window: a start costs a round trip, and a slot waiting for it idles. So the worker starts (and a claim
 * makes active) as many jobs beyond the free slots as its handlers finish within WINDOW_ROUND_TRIPS round trips at
 * their pace (Pace.finishedWithin), at most `batchSize`; they wait for a slot in `ready`, about that long. Slow
 * handlers get no window, nor does a worker whose pace is not known yet. A wrong pace (fast jobs, then a slow one) is
 * bounded: a job that had no slot after GIVE_BACK_ROUND_TRIPS round trips (at least MIN_AHEAD_MS) is given back, its
 * run not counted (giveBackAfterMs). Three round trips rather than one: a 100,000-job drain 1.28x faster, starts of
 * ~132 jobs instead of ~41 (bench/README.md, "Won back: a start window of three round trips").
 *
 * The round trip is the slower of a start and a claim (roundTripMs). The claim that brings the next jobs takes a
 * claim's round trip, so a window of start round trips (the shorter ones) left the claimed jobs beyond it to separate
 * starts: 3–45% of a 100,000-job drain's jobs, varying from run to run, each a third row version. Measured in claim
 * round trips, claims start nearly all they take (about 1% of the jobs left to starts): W4 1.19–1.83x, W8 0.98–1.10x
 * in two A/B runs, WAL per job 903–906 instead of 969–994 bytes (bench/README.md, "Won back: the window in claim round
 * trips").
 */
export class Slots {
  running = 0
  starting = 0
  reserved = 0
  readonly pace = new Pace()

  constructor(
    private readonly concurrency: number,
    private readonly batchSize: number,
    private readonly counts: HeldCounts,
    /** Mean latency of the start statements, ms (StepBatcher.startMs). */
    private readonly startMs: () => number,
  ) {}

  /** Slots that no running handler, start in flight, started job or claim in flight has taken (may be negative). */
  get free(): number {
    return this.concurrency - this.running - this.starting - this.reserved - this.counts.ready
  }

  /**
   * Slots a hand-off may take: the free ones and those a claim in flight reserved. The hand-off is already started and
   * the claim may bring nothing (the claim an idle worker sends right after it advertised usually does); a job the claim
   * starts that then finds no slot waits in `ready` and is given back after giveBackAfterMs, as any started ahead. Counted
   * as taken, the reservation gave back hand-offs to an idle worker whose claim happened to be in flight (4 in 8 runs of
   * test/worker.hand-off.test.ts's first test under CPU load).
   */
  get handOffRoom(): number {
    return this.free + this.reserved
  }

  /** Whether another handler may run now. */
  get handlerFree(): boolean {
    return this.running < this.concurrency
  }

  /** Starts the worker may send now: the free slots plus the start window. */
  get startRoom(): number {
    return this.free + this.pace.finishedWithin(WINDOW_ROUND_TRIPS * this.roundTripMs(), this.batchSize)
  }

  /** The round trip the window and the give-back are measured in: the slower of a start and a claim (see above). */
  private roundTripMs(): number {
    return Math.max(this.startMs(), this.pace.claimLatencyMs)
  }

  /** How long a job started ahead may wait for a slot before it is given back. */
  giveBackAfterMs(): number {
    return Math.max(MIN_AHEAD_MS, GIVE_BACK_ROUND_TRIPS * this.roundTripMs())
  }

  /**
   * Jobs worth holding ahead at least: claimed-ahead jobs are pending (a replace supersedes them, an idle worker takes
   * them over), so holding some costs little, while every claim has a fixed cost; 16 per slot, at most half a batch.
   * Measured on a 1,000,000-job backlog with no-op handlers at concurrency 16 (bench/README.md): about 9,000 jobs/s
   * with the pace alone, which settles low once every start costs a round trip, against about 18,000 with this floor.
   */
  private get prefetchFloor(): number {
    return Math.min(Math.ceil(this.batchSize / 2), 16 * this.concurrency)
  }

  /**
   * What to claim next: the free slots plus a prefetch sized to the handlers' pace (see Pace) and at least the floor,
   * at most `batchSize` per statement and `concurrency + batchSize` held in all, not counting up to `batchSize` jobs
   * whose handlers have ended and whose outcomes are being written: counted in full, the next claim waited for the
   * completion statement in flight, so that claims were in flight 82% of a 100,000-job drain instead of 94%, at about
   * 0.9x its speed (bench/README.md, "Claims while completions are written"). While it holds any job (buffered,
   * started, running or being completed) it waits until it wants at least half the prefetch: one claim is in flight at
   * a time, and a small top-up claim would hold that turn while a large batch is worked off (with the wider start
   * window, claims of one job went out whenever completions filled the cap on held jobs). Reserves the slots of the
   * jobs the claim will start; `claimReturned` frees them.
   */
  demand(): Demand {
    const { buffered, held, finishing, accepting } = this.counts
    if (!accepting) return { limit: 0, startNow: 0, busy: false }
    const free = Math.max(0, this.free)
    const prefetch = Math.max(this.pace.prefetch(this.batchSize), this.prefetchFloor)
    const unfinished = held - Math.min(finishing, this.batchSize)
    const limit = Math.min(this.batchSize, free + prefetch - buffered, this.concurrency + this.batchSize - unfinished)
    const waiting = buffered + this.starting + this.counts.ready
    if (limit <= 0 || (held > 0 && limit < Math.min(this.batchSize, Math.ceil(prefetch / 2)))) return { limit: 0, startNow: 0, busy: false }
    // Buffered jobs take the free slots (and the start window) first.
    const startNow = Math.min(Math.max(0, this.startRoom - buffered), limit)
    this.reserved += startNow
    return { limit, startNow, busy: this.running > 0 || waiting > 0 }
  }

  /** The claim of `demand` came back after `latencyMs`: its reserved slots are free, its latency feeds the pace. */
  claimReturned(demand: Demand, latencyMs: number): void {
    this.reserved -= demand.startNow
    if (demand.limit > 0 && latencyMs > 0) this.pace.claimReturned(latencyMs, demand.busy)
  }
}
