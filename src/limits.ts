// Flow control for a Queue: its limits (concurrency, rate limit) stored in Postgres and enforced by every worker's
// claim (docs/flow-control.md).

import type { Execute } from './db/executor.js'
import { sqlFor } from './db/sql-files.js'
import { MAX_DURATION_MS, checkInteger, checkOptions, fail, isPlainObject } from './validate.js'

/** A sliding-window rate limit: in any interval of `durationMs`, at most `max` jobs start. */
export interface RateLimit {
  /** Starts allowed per window, 1 to 10,000. */
  max: number
  /** The window, in ms (database clock). */
  durationMs: number
}

/** The limits of each group of a queue (jobs added with `group: { id }`); each `null` clears it, a key left out keeps it. */
export interface GroupLimits {
  /** At most this many jobs of each group `active` at once (1 to 10,000; 1 is one at a time per group). */
  concurrency?: number | null
  /** At most `max` starts of each group in any interval of `durationMs`. */
  rateLimit?: RateLimit | null
}

/** A queue's limits; each `null` clears it, a key left out keeps it. */
export interface Limits {
  /** At most this many jobs of the queue `active` at once, across every worker and host (1 to 10,000). */
  concurrency?: number | null
  /** At most `max` starts in any interval of `durationMs`. */
  rateLimit?: RateLimit | null
  /** The same limits for each group id separately; `null` clears both. Jobs without a group are not subject to them. */
  group?: GroupLimits | null
}

/** A queue's limits as stored: null where none is set. */
export interface QueueLimits {
  concurrency: number | null
  rateLimit: RateLimit | null
  /** Concurrency slots held by running jobs now. */
  slotsInUse: number
  /** The group limits, null when the queue has none. */
  group: {
    concurrency: number | null
    rateLimit: RateLimit | null
    /** Group slots held by running jobs now, all groups together. */
    slotsInUse: number
  } | null
}

/** Most slots or rate rows one limit may have: each is a row. */
export const MAX_LIMIT = 10_000

const LIMIT_KEYS = ['concurrency', 'rateLimit', 'group'] as const
const GROUP_KEYS = ['concurrency', 'rateLimit'] as const
const RATE_KEYS = ['max', 'durationMs'] as const

function rateLimitOf(value: unknown, field: string): RateLimit {
  if (!isPlainObject(value)) fail('INVALID_TYPE', field, 'must be { max, durationMs } or null')
  const o = checkOptions<RateLimit>(value, field, RATE_KEYS)
  return {
    max: checkInteger(o.max, `${field}.max`, 1, MAX_LIMIT),
    durationMs: checkInteger(o.durationMs, `${field}.durationMs`, 1, MAX_DURATION_MS),
  }
}

/** A concurrency and a rate limit as given (`field` names them); which of the two were given. */
function pairOf(o: GroupLimits, field: string): [number | null, RateLimit | null, boolean, boolean] {
  const concurrency =
    o.concurrency === undefined || o.concurrency === null
      ? null
      : checkInteger(o.concurrency, `${field}.concurrency`, 1, MAX_LIMIT)
  const rate = o.rateLimit === undefined || o.rateLimit === null ? null : rateLimitOf(o.rateLimit, `${field}.rateLimit`)
  return [concurrency, rate, 'concurrency' in o, 'rateLimit' in o]
}

/** Checks setLimits' argument (before any I/O) and returns the statement's parameters (sql/set-limits.sql). */
export function limitsParams(queue: string, limits: unknown): unknown[] {
  if (limits === undefined) fail('REQUIRED', 'limits', 'is required')
  const o = checkOptions<Limits>(limits, 'limits', LIMIT_KEYS)
  const [concurrency, rate, setsConcurrency, setsRate] = pairOf(o, 'limits')
  let group: ReturnType<typeof pairOf> = [null, null, false, false]
  if (o.group === null) group = [null, null, true, true]
  else if (o.group !== undefined) {
    if (!isPlainObject(o.group)) fail('INVALID_TYPE', 'limits.group', 'must be { concurrency, rateLimit } or null')
    group = pairOf(checkOptions<GroupLimits>(o.group, 'limits.group', GROUP_KEYS), 'limits.group')
  }
  const [groupConcurrency, groupRate, setsGroupConcurrency, setsGroupRate] = group
  return [
    queue,
    concurrency,
    rate?.max ?? null,
    rate?.durationMs ?? null,
    setsConcurrency,
    setsRate,
    groupConcurrency,
    groupRate?.max ?? null,
    groupRate?.durationMs ?? null,
    setsGroupConcurrency,
    setsGroupRate,
  ]
}

export async function setLimits(execute: Execute, schema: string, params: unknown[]): Promise<void> {
  await execute(sqlFor('set-limits', schema), params)
}

/** A row of sql/get-limits.sql or of the queue_limits view. */
export interface LimitsRow {
  concurrency: number | null
  rate_max: number | null
  rate_duration_ms: string | null
  slots_in_use: number
  group_concurrency: number | null
  group_rate_max: number | null
  group_rate_duration_ms: string | null
  group_slots_in_use: number
}

const rateOf = (max: number | null, durationMs: string | null): RateLimit | null =>
  max === null ? null : { max, durationMs: Number(durationMs) }

export function limitsOf(r: LimitsRow): QueueLimits {
  return {
    concurrency: r.concurrency,
    rateLimit: rateOf(r.rate_max, r.rate_duration_ms),
    slotsInUse: r.slots_in_use,
    group:
      r.group_concurrency === null && r.group_rate_max === null
        ? null
        : {
            concurrency: r.group_concurrency,
            rateLimit: rateOf(r.group_rate_max, r.group_rate_duration_ms),
            slotsInUse: r.group_slots_in_use,
          },
  }
}

export async function getLimits(execute: Execute, schema: string, queue: string): Promise<QueueLimits> {
  const [row] = await execute<LimitsRow>(sqlFor('get-limits', schema), [queue])
  return limitsOf(row as LimitsRow)
}
