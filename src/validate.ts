// Input checks (docs/validation.md): every public entry point validates here, before any I/O.

import { ValidationError } from './errors.js'

/** Longest name, jobId or dedup key, in UTF-8 bytes. */
export const MAX_TEXT_BYTES = 255
/** Longest accepted duration (ten years), in milliseconds. */
export const MAX_DURATION_MS = 315_360_000_000
const MAX_INT32 = 2_147_483_647
/**
 * Deepest accepted JSON (job data, progress), in levels: the value itself is level 1, what an array or object holds
 * one level below it. Deeper data is rejected with `TOO_DEEP`: Node's own JSON.stringify and JSON.parse overflow the
 * call stack a few thousand levels down (so would the check itself), and no real payload comes near this.
 */
export const MAX_JSON_DEPTH = 1_000

export function fail(code: ValidationError['code'], field: string, message: string): never {
  throw new ValidationError(code, field, message)
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const proto: unknown = Object.getPrototypeOf(value)
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
  if (value.length * 3 > maxBytes && Buffer.byteLength(value, 'utf8') > maxBytes)
    fail('TOO_LONG', field, `must be at most ${maxBytes} bytes`)
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

/** `field` followed by the keys and indices of `path`, as error fields name them (`data.list[0].when`). */
function fieldAt(field: string, path: readonly (string | number)[]): string {
  let out = field
  for (const step of path) out += typeof step === 'number' ? `[${step}]` : `.${step}`
  return out
}

/**
 * One walk over a value: `path` (keys and indices) and `ancestors` (the objects being walked, for cycles) are stacks
 * shared by the whole walk, so that a field name is only built for an error, never on the way; `left` counts down the
 * bytes of JSON the value may still take.
 */
interface Walk {
  field: string
  path: (string | number)[]
  ancestors: object[]
  maxBytes: number
  left: number
}

function tooLarge(field: string, maxBytes: number): never {
  fail('TOO_LARGE', field, `is larger than the limit of ${maxBytes} bytes`)
}

/**
 * Counts `bytes` against the size limit, and rejects the value as soon as it is passed: a value of millions of items
 * is rejected after the first megabyte's worth, not after a walk and a JSON.stringify of the whole (seconds of a
 * blocked event loop). `bytes` is a lower bound of what the part takes in JSON's UTF-8: a string at least its UTF-16
 * length and its two quotes (escapes only add; no code unit takes less than a byte), a number one digit, a comma per
 * item after the first, a key its quotes and colon, so the limit is never passed early.
 */
function spend(w: Walk, bytes: number): void {
  w.left -= bytes
  if (w.left < 0) tooLarge(w.field, w.maxBytes)
}

/** Checks one value for JSON, below `w.path`. */
function checkJson(v: unknown, w: Walk): void {
  const { field, path, ancestors } = w
  // The path holds one step per level above this value: the recursion stops at the limit, long before the stack does.
  if (path.length >= MAX_JSON_DEPTH) fail('TOO_DEEP', field, `is nested more than ${MAX_JSON_DEPTH} levels deep`)
  switch (typeof v) {
    case 'string':
      spend(w, v.length + 2)
      if (v.includes('\u0000') || !v.isWellFormed()) checkWellFormed(v, fieldAt(field, path))
      return
    case 'boolean':
      spend(w, 4)
      return
    case 'number':
      spend(w, 1)
      if (!Number.isFinite(v)) fail('NOT_JSON', fieldAt(field, path), `${v} is not representable in JSON`)
      return
    case 'object': {
      if (v === null) return spend(w, 4)
      if (ancestors.includes(v)) fail('NOT_JSON', fieldAt(field, path), 'contains a cycle')
      ancestors.push(v)
      if (Array.isArray(v)) {
        // Brackets and commas.
        spend(w, 1 + Math.max(v.length, 1))
        for (let i = 0; i < v.length; i++) {
          path.push(i)
          if (!(i in v)) fail('NOT_JSON', fieldAt(field, path), 'sparse arrays are not JSON')
          checkJson(v[i], w)
          path.pop()
        }
      } else if (isPlainObject(v)) {
        const keys = Object.keys(v)
        // Braces, commas, and each key's quotes and colon.
        spend(w, 1 + Math.max(keys.length, 1) + 3 * keys.length)
        for (let i = 0; i < keys.length; i++) {
          const key = keys[i] as string
          path.push(key)
          spend(w, key.length)
          if (key.includes('\u0000') || !key.isWellFormed()) checkWellFormed(key, fieldAt(field, path))
          checkJson(v[key], w)
          path.pop()
        }
        if (Object.getOwnPropertySymbols(v).length > 0)
          fail('NOT_JSON', fieldAt(field, path), 'symbol keys are not JSON')
      } else {
        const kind = v.constructor?.name ?? 'object'
        fail(
          'NOT_JSON',
          fieldAt(field, path),
          `${kind} is not plain JSON (convert it first, e.g. a Date to an ISO string)`,
        )
      }
      ancestors.pop()
      return
    }
    default:
      fail('NOT_JSON', fieldAt(field, path), `${typeof v} is not JSON`)
  }
}

/**
 * Serialises job data to JSON text, rejecting anything JSON would change or
 * drop silently: undefined, functions, symbols, BigInt, non-finite numbers,
 * Dates and other class instances, cycles, and strings Postgres refuses; and data
 * nested deeper than {@link MAX_JSON_DEPTH} levels (`TOO_DEEP`, naming `field` itself), or larger than `maxBytes`
 * (`TOO_LARGE`, as soon as the walk passes it).
 * Called once per item of a batch, so it allocates little: no closures, no
 * field names unless one is at fault, no byte count when the text cannot be too large.
 */
export function serializeData(value: unknown, field: string, maxBytes: number): string {
  checkJson(value, { field, path: [], ancestors: [], maxBytes, left: maxBytes })
  const text = JSON.stringify(value)
  // The walk counted a lower bound; escapes and multi-byte characters may still pass the limit. A UTF-16 code unit is
  // at most 3 bytes of UTF-8.
  if (text.length * 3 > maxBytes && Buffer.byteLength(text, 'utf8') > maxBytes) tooLarge(field, maxBytes)
  return text
}
