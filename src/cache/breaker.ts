// Every Redis command of the cache layer goes through here: a time bound, a circuit breaker, the outcome counters and rate-limited warnings.

import { Counters } from '../counters.js'
import { countInto } from '../telemetry/metrics.js'
import type { Logger } from '../logger.js'

/**
 * What the cache layer counts (`queue.cacheOutcomes`, `worker.cacheOutcomes`, `effects.cacheOutcomes`):
 * - `hit`: a pre-check answered from Redis, no Postgres round trip;
 * - `miss`: a pre-check asked Redis and went on to Postgres (no entry, an older epoch, a bucket on hold, an expired fact);
 * - `fallback`: a Redis command failed or took longer than its bound; the call went on with Postgres;
 * - `breaker-open`: Redis was not asked, after repeated failures (see {@link RedisGate});
 * - `unsynced`: Redis was not asked because this process's epochs are not current (its listener is down or starting).
 */
export type CacheOutcome = 'hit' | 'miss' | 'fallback' | 'breaker-open' | 'unsynced'

/** The answer of a command that failed, timed out, or was not sent because the breaker is open. */
export const FAILED = Symbol('pgonce.redis-failed')
export type Failed = typeof FAILED

/**
 * A promise of FAILED after `ms`, and the timer to clear. The timer's end waits for one turn of the event loop
 * (setImmediate runs after the poll phase): an answer already in the socket when a busy process gets to its timers
 * still wins, instead of counting as a timeout.
 */
function deadline(ms: number): { expired: Promise<Failed>; timer: NodeJS.Timeout } {
  let timer!: NodeJS.Timeout
  const expired = new Promise<Failed>((resolve) => {
    timer = setTimeout(() => setImmediate(() => resolve(FAILED)), ms)
  })
  return { expired, timer }
}

/** `promise`'s value, or FAILED if it rejects or takes longer than `ms` (its rejection is handled either way). */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | Failed> {
  const { expired, timer } = deadline(ms)
  try {
    return await Promise.race([promise.catch((): Failed => FAILED), expired])
  } finally {
    clearTimeout(timer)
  }
}

/** Failures in a row, with no success for {@link QUIET_MS}, that open the breaker. */
const FAILURES_TO_OPEN = 3
/**
 * How long Redis must have failed everything before the breaker opens: one stall of a busy process times out every
 * command in flight at once, and should not turn the layer off; a dead or paused Redis fails them all for longer.
 */
const QUIET_MS = 250
/** How long an open breaker keeps the layer off Redis, doubling on each failed probe up to {@link MAX_OPEN_MS}. */
const OPEN_MS = 2_000
const MAX_OPEN_MS = 30_000
/** At most one warning per this many ms. */
const WARN_EVERY_MS = 10_000

/**
 * Runs Redis commands with a bound of `timeoutMs` each (a client of the caller's may have no commandTimeout and an
 * offline queue; the bound holds whatever it does), and keeps the layer off Redis for a while once
 * {@link FAILURES_TO_OPEN} commands in a row have failed and nothing succeeded for {@link QUIET_MS}: a dead Redis does
 * not add its timeout to every call. After the open period one command probes; its success closes the breaker. A
 * command that timed out may still run later in Redis; every write of the layer is safe to apply late (see
 * src/cache/invalidation.ts).
 */
export class RedisGate {
  readonly outcomes = new Counters<CacheOutcome>(countInto('cache'))
  private failures = 0
  private succeededAt = 0
  private openUntil = 0
  private openMs = OPEN_MS
  private probing = false
  private lastWarn = 0
  private unwarned = 0

  constructor(
    private readonly timeoutMs: number,
    private readonly logger: Logger,
  ) {}

  /** True while the breaker keeps Redis out (callers count `breaker-open` themselves when it matters). */
  get open(): boolean {
    return Date.now() < this.openUntil || this.probing
  }

  /**
   * Runs `command`; FAILED if it failed, took longer than the bound, or was not sent (breaker open). `what` names it in
   * warnings. `timeoutMs` overrides the bound for background commands.
   */
  async run<T>(what: string, command: () => Promise<T>, timeoutMs = this.timeoutMs): Promise<T | Failed> {
    if (this.open) {
      this.outcomes.increment('breaker-open')
      return FAILED
    }
    const probe = this.openUntil !== 0
    if (probe) this.probing = true
    const { expired, timer } = deadline(timeoutMs)
    try {
      const sent = command()
      sent.catch(() => {})
      const answer = await Promise.race([sent, expired])
      if (answer === FAILED) throw new Error(`no answer within ${timeoutMs} ms`)
      this.succeeded()
      return answer
    } catch (err) {
      this.failed(what, err as Error)
      return FAILED
    } finally {
      clearTimeout(timer)
      if (probe) this.probing = false
    }
  }

  /** Logs at warn, at most once per {@link WARN_EVERY_MS}, saying how many were held back. */
  warn(obj: Record<string, unknown>, msg: string): void {
    const now = Date.now()
    if (now - this.lastWarn < WARN_EVERY_MS) {
      this.unwarned++
      return
    }
    this.logger.warn({ ...obj, suppressed: this.unwarned, outcomes: this.outcomes.snapshot() }, msg)
    this.lastWarn = now
    this.unwarned = 0
  }

  private succeeded(): void {
    this.failures = 0
    this.succeededAt = Date.now()
    if (this.openUntil !== 0) {
      this.openUntil = 0
      this.openMs = OPEN_MS
      this.logger.info('pgonce: Redis answers again; the cache layer uses it')
    }
  }

  private failed(what: string, err: Error): void {
    this.outcomes.increment('fallback')
    this.failures++
    if (this.openUntil !== 0) {
      this.openMs = Math.min(this.openMs * 2, MAX_OPEN_MS)
      this.openUntil = Date.now() + this.openMs
    } else if (this.failures >= FAILURES_TO_OPEN && Date.now() - this.succeededAt >= QUIET_MS) {
      this.openUntil = Date.now() + this.openMs
    }
    this.warn(
      { err: err.message, command: what, breakerOpenMs: this.openUntil === 0 ? 0 : this.openMs },
      'pgonce: Redis command failed; answering from Postgres',
    )
  }
}
