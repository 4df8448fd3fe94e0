// ctx.rateLimit's argument check: a handler whose upstream answered 429 holds its queue, or its job's group, a while.

import { MAX_DURATION_MS, checkInteger, checkOptions, fail } from '../validate.js'

/** What `ctx.rateLimit` holds: the job's queue (the default) or only the job's group (docs/flow-control.md). */
export interface RateLimitOptions {
  scope?: 'queue' | 'group'
}

/** Checks `ctx.rateLimit(ms, options)` before anything is written; returns the hold in ms and its scope. */
export function checkRateLimitCall(ms: unknown, options: unknown): { ms: number; scope: 'queue' | 'group' } {
  const o = checkOptions<RateLimitOptions>(options, 'options', ['scope'])
  if (o.scope !== undefined && o.scope !== 'queue' && o.scope !== 'group')
    fail('INVALID_TYPE', 'options.scope', "must be 'queue' or 'group'")
  return { ms: checkInteger(ms, 'ms', 1, MAX_DURATION_MS), scope: o.scope ?? 'queue' }
}
