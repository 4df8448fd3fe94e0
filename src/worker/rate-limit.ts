// ctx.rateLimit's argument check: a handler whose upstream answered 429 holds its queue for a while.

import { MAX_DURATION_MS, checkInteger, checkOptions, fail } from '../validate.js'

/** What `ctx.rateLimit` holds: the job's queue (the default) or only the job's group. */
export interface RateLimitOptions {
  scope?: 'queue'
}

/** Checks `ctx.rateLimit(ms, options)` before anything is written; returns the hold in ms. */
export function checkRateLimitCall(ms: unknown, options: unknown): number {
  const o = checkOptions<RateLimitOptions>(options, 'options', ['scope'])
  if (o.scope !== undefined && o.scope !== 'queue') fail('INVALID_TYPE', 'options.scope', "must be 'queue'")
  return checkInteger(ms, 'ms', 1, MAX_DURATION_MS)
}
