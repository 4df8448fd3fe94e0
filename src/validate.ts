// Input checks of DESIGN.md §8: every public entry point validates here, before any I/O.

import { ValidationError } from './errors.js'

/** Longest name, jobId or dedup key, in UTF-8 bytes. */
export const MAX_TEXT_BYTES = 255
/** Longest accepted duration (ten years), in milliseconds. */
export const MAX_DURATION_MS = 315_360_000_000
const MAX_INT32 = 2_147_483_647

export function fail(code: ValidationError['code'], field: string, message: string): never {
  throw new ValidationError(code, field, message)
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** An options object: undefined (= empty) or a plain object whose keys are all known. */
export function checkOptions<T extends object>(
  value: unknown,
  field: string,
  known: readonly (keyof T & string)[],
): Partial<T> {
  if (value === undefined) return {}
  if (!isPlainObject(value)) fail('INVALID_TYPE', field, 'must be a plain object')
  for (const key of Object.keys(value)) {
    if (!known.includes(key as keyof T & string)) {
      fail('UNKNOWN_OPTION', `${field}.${key}`, `unknown option (known: ${known.join(', ')})`)
    }
  }
  return value as Partial<T>
}

function checkWellFormed(value: string, field: string): void {
  if (value.includes('\u0000')) fail('NUL_BYTE', field, 'must not contain NUL bytes')
  if (!value.isWellFormed()) fail('LONE_SURROGATE', field, 'must not contain lone UTF-16 surrogates')
}

/** A non-empty, well-formed string of at most `maxBytes` UTF-8 bytes. */
export function checkText(value: unknown, field: string, maxBytes = MAX_TEXT_BYTES): string {
  if (value === undefined || value === null) fail('REQUIRED', field, 'is required')
  if (typeof value !== 'string') fail('INVALID_TYPE', field, `must be a string, got ${typeof value}`)
  if (value.length === 0) fail('EMPTY', field, 'must not be empty')
  if (Buffer.byteLength(value, 'utf8') > maxBytes) fail('TOO_LONG', field, `must be at most ${maxBytes} bytes`)
  checkWellFormed(value, field)
  return value
}

/** A whole number in [min, max]; rejects NaN, Infinity, fractions and non-numbers. */
export function checkInteger(value: unknown, field: string, min: number, max = MAX_INT32): number {
  if (typeof value !== 'number') fail('INVALID_TYPE', field, `must be a number, got ${typeof value}`)
  if (!Number.isInteger(value)) fail('NOT_INTEGER', field, `must be a whole number, got ${value}`)
  if (value < min || value > max) fail('OUT_OF_RANGE', field, `must be between ${min} and ${max}, got ${value}`)
  return value
}

export function checkBoolean(value: unknown, field: string): boolean {
  if (typeof value !== 'boolean') fail('INVALID_TYPE', field, `must be a boolean, got ${typeof value}`)
  return value
}

/** An internal job id: a decimal string (as returned in `job.id`). */
export function checkJobIdRef(value: unknown, field: string): string {
  if (typeof value !== 'string') fail('INVALID_TYPE', field, `must be a job id string, got ${typeof value}`)
  if (!/^[1-9][0-9]{0,18}$/.test(value) || BigInt(value) > 9223372036854775807n) {
    fail('INVALID_TYPE', field, 'must be a job id as returned in job.id')
  }
  return value
}

/**
 * Serialises job data to JSON text, rejecting anything JSON would change or
 * drop silently: undefined, functions, symbols, BigInt, non-finite numbers,
 * Dates and other class instances, cycles, and strings Postgres refuses.
 */
export function serializeData(value: unknown, field: string, maxBytes: number): string {
  const seen = new Set<object>()
  const walk = (v: unknown, path: string): void => {
    switch (typeof v) {
      case 'string':
        checkWellFormed(v, path)
        return
      case 'boolean':
        return
      case 'number':
        if (!Number.isFinite(v)) fail('NOT_JSON', path, `${v} is not representable in JSON`)
        return
      case 'object': {
        if (v === null) return
        if (seen.has(v)) fail('NOT_JSON', path, 'contains a cycle')
        seen.add(v)
        if (Array.isArray(v)) {
          for (let i = 0; i < v.length; i++) {
            if (!(i in v)) fail('NOT_JSON', `${path}[${i}]`, 'sparse arrays are not JSON')
            walk(v[i], `${path}[${i}]`)
          }
        } else if (isPlainObject(v)) {
          for (const [key, child] of Object.entries(v)) {
            checkWellFormed(key, `${path}.${key}`)
            walk(child, `${path}.${key}`)
          }
          if (Object.getOwnPropertySymbols(v).length > 0) fail('NOT_JSON', path, 'symbol keys are not JSON')
        } else {
          const kind = (v as object).constructor?.name ?? 'object'
          fail('NOT_JSON', path, `${kind} is not plain JSON (convert it first, e.g. a Date to an ISO string)`)
        }
        seen.delete(v)
        return
      }
      default:
        fail('NOT_JSON', path, `${typeof v} is not JSON`)
    }
  }
  walk(value, field)
  const text = JSON.stringify(value)
  if (Buffer.byteLength(text, 'utf8') > maxBytes) {
    fail('TOO_LARGE', field, `is larger than the limit of ${maxBytes} bytes`)
  }
  return text
}
