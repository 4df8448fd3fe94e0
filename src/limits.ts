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

/** A queue's limits; each `null` clears it, a key left out keeps it. */
export interface Limits {
  /** At most this many jobs of the queue `active` at once, across every worker and host (1 to 10,000). */
  concurrency?: number | null
  /** At most `max` starts in any interval of `durationMs`. */
  rateLimit?: RateLimit | null
}

/** A queue's limits as stored: null where none is set. */
export interface QueueLimits {
  concurrency: number | null
  rateLimit: RateLimit | null
  /** Concurrency slots held by running jobs now. */
  slotsInUse: number
}

/** Most slots or rate rows one limit may have: each is a row. */
export const MAX_LIMIT = 10_000

const LIMIT_KEYS = ['concurrency', 'rateLimit'] as const
const RATE_KEYS = ['max', 'durationMs'] as const

function rateLimitOf(value: unknown, field: string): RateLimit {
  if (!isPlainObject(value)) fail('INVALID_TYPE', field, 'must be { max, durationMs } or null')
  const o = checkOptions<RateLimit>(value, field, RATE_KEYS)
  return {
    max: checkInteger(o.max, `${field}.max`, 1, MAX_LIMIT),
    durationMs: checkInteger(o.durationMs, `${field}.durationMs`, 1, MAX_DURATION_MS),
  }
}

/** Checks setLimits' argument (before any I/O) and returns the statement's parameters. */
export function limitsParams(queue: string, limits: unknown): unknown[] {
  if (limits === undefined) fail('REQUIRED', 'limits', 'is required')
  const o = checkOptions<Limits>(limits, 'limits', LIMIT_KEYS)
  const concurrency =
    o.concurrency === undefined || o.concurrency === null
      ? null
      : checkInteger(o.concurrency, 'limits.concurrency', 1, MAX_LIMIT)
  const rate = o.rateLimit === undefined || o.rateLimit === null ? null : rateLimitOf(o.rateLimit, 'limits.rateLimit')
  return [queue, concurrency, rate?.max ?? null, rate?.durationMs ?? null, 'concurrency' in o, 'rateLimit' in o]
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
}

export function limitsOf(r: LimitsRow): QueueLimits {
  return {
    concurrency: r.concurrency,
    rateLimit: r.rate_max === null ? null : { max: r.rate_max, durationMs: Number(r.rate_duration_ms) },
    slotsInUse: r.slots_in_use,
  }
}

export async function getLimits(execute: Execute, schema: string, queue: string): Promise<QueueLimits> {
  const [row] = await execute<LimitsRow>(sqlFor('get-limits', schema), [queue])
  return limitsOf(row as LimitsRow)
}
