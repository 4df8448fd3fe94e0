// An upper bound of the database clock, from this process's monotonic clock: how the cache knows an entry's fact has not expired.

import { performance } from 'node:perf_hooks'

/** How fast two clocks may drift apart (100 ppm, far above what NTP-disciplined clocks do). */
const DRIFT = 1e-4
/** A tighter sample replaces the kept one at once; a looser one only once the kept one is this old. */
const REFRESH_MS = 10_000

/** This process's clock in ms since 1970, monotonic (a wall-clock step does not move it). */
export function localNow(): number {
  return performance.timeOrigin + performance.now()
}

/**
 * Every sample is a statement's `clock_timestamp()` (D) and the local time just before the statement was sent (t):
 * D was read after t, so `D - t` bounds the database clock's lead over the local clock from above. The bound is the
 * smallest recent lead plus a drift allowance; an entry is answered only while its fact ends after it. Entries are
 * never trusted on the Redis TTL alone: a SET delayed in a paused Redis starts its TTL late.
 */
export class DbClock {
  private lead: number | null = null
  private at = 0

  /** The local time to pass to {@link sample} with the answer of a statement about to be sent. */
  mark(): number {
    return localNow()
  }

  sample(sentAt: number, dbNowMs: unknown): void {
    const db = Number(dbNowMs)
    if (!Number.isFinite(db)) return
    const lead = db - sentAt
    const now = localNow()
    if (this.lead === null || lead <= this.lead || now - this.at > REFRESH_MS) {
      this.lead = lead
      this.at = now
    }
  }

  /** The latest the database clock can read now, in ms since 1970; null before the first sample. */
  upper(): number | null {
    if (this.lead === null) return null
    const now = localNow()
    return now + this.lead + (now - this.at) * DRIFT + 1
  }
}
