// Checks a job's runAt (a Date, an ISO-8601 string with an offset, or epoch ms) into epoch ms, before any I/O.

import { fail } from '../validate.js'

/** The latest accepted runAt, 9999-12-31T23:59:59.999Z: within every clock's range, Date's and PostgreSQL's. */
export const MAX_RUN_AT_MS = 253_402_300_799_999

// Date, time (seconds and fraction optional) and a required offset: a time without one names no instant.
const ISO_WITH_OFFSET = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/

function inRange(ms: number, field: string): number {
  if (ms < 0 || ms > MAX_RUN_AT_MS)
    fail('OUT_OF_RANGE', field, 'must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z')
  return ms
}

function fromIso(value: string, field: string): number {
  const m = ISO_WITH_OFFSET.exec(value)
  if (m === null)
    fail('INVALID_TYPE', field, 'must be an ISO-8601 date-time with an offset (e.g. 2025-06-02T09:00:00+02:00)')
  const [year, month, day, hour] = m.slice(1, 5).map(Number) as [number, number, number, number]
  // Date.parse rolls 30 February over into March; the calendar date must exist as written.
  const d = new Date(Date.UTC(year, month - 1, day))
  const ms = Date.parse(value)
  if (d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day || hour > 23 || Number.isNaN(ms))
    fail('INVALID_TYPE', field, 'is not a valid date-time')
  return inRange(ms, field)
}

/** The instant `value` names, in whole epoch ms (a Date's or a string's fraction below a ms is dropped). */
export function checkRunAt(value: unknown, field: string): number {
  if (value instanceof Date) {
    const ms = value.getTime()
    if (Number.isNaN(ms)) fail('INVALID_TYPE', field, 'is an invalid Date')
    return inRange(ms, field)
  }
  if (typeof value === 'string') return fromIso(value, field)
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) fail('NOT_INTEGER', field, `must be whole epoch milliseconds, got ${value}`)
    return inRange(value, field)
  }
  return fail(
    'INVALID_TYPE',
    field,
    `must be a Date, an ISO-8601 string with an offset or epoch ms, got ${typeof value}`,
  )
}
