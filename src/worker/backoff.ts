// The delay before a failed job's next attempt: fixed, or exponential with jitter.

import type { Backoff } from '../job.js'
import { MAX_DURATION_MS } from '../validate.js'

/**
 * Milliseconds to wait before the next attempt after `attemptsMade` runs.
 * Exponential doubles `delay` per attempt made (delay, 2·delay, 4·delay, …);
 * `jitter` (default 0 for fixed, 0.5 for exponential) randomly takes up to
 * that share off each delay, so that jobs failing together do not retry in
 * lockstep. The database adds the result to its own clock.
 */
export function retryDelayMs(backoff: Backoff | null, attemptsMade: number, random: () => number = Math.random): number {
  if (backoff === null || backoff.delay <= 0) return 0
  const base = backoff.type === 'exponential'
    ? backoff.delay * 2 ** Math.max(0, Math.min(attemptsMade - 1, 52))
    : backoff.delay
  const jitter = backoff.jitter ?? (backoff.type === 'exponential' ? 0.5 : 0)
  return Math.round(Math.min(MAX_DURATION_MS, base) * (1 - jitter * random()))
}
