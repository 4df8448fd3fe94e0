// Values and rows as node-postgres sends and reads them, for drivers that encode or parse differently.
// pg sends every parameter as text of unknown type, so the server types it from the statement (`$2::text[]`,
// `$3::jsonb`); a driver that types values itself breaks exactly there (pg-boss#830: Drizzle spread an array
// into several parameters; pg-boss#880: Bun's driver JSON-encoded a JSON text a second time).

/** `value` as the text pg would send for it (pg's own prepareValue, arrays as array literals), or null. */
export function pgText(value: unknown): string | null {
  if (value === null || value === undefined) return null
  if (Array.isArray(value)) return arrayLiteral(value)
  return scalarText(value)
}

function scalarText(value: unknown): string {
  if (typeof value === 'string') return value
  if (value instanceof Date) return value.toISOString()
  if (value instanceof Uint8Array) return `\\x${Buffer.from(value).toString('hex')}`
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value as string | number | bigint | boolean) // eslint-disable-line @typescript-eslint/no-unnecessary-type-assertion
}

/** A PostgreSQL array literal: every element quoted (so that commas, braces, quotes and spaces are data), NULL bare. */
function arrayLiteral(values: readonly unknown[]): string {
  const parts = values.map((v) =>
    v === null || v === undefined
      ? 'NULL'
      : Array.isArray(v)
        ? arrayLiteral(v)
        : `"${scalarText(v).replace(/[\\"]/g, (c) => `\\${c}`)}"`,
  )
  return `{${parts.join(',')}}`
}

/** Columns pgonce reads as Date: timestamps end in `_at` (run_at, created_at…) or `_until` (locked_until). */
const TIME_COLUMN = /(_at|_until)$/
/** PostgreSQL's text output of a timestamptz (DateStyle ISO), which some ORMs leave unparsed. */
const TIMESTAMPTZ = /^(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d(?:\.\d+)?)([+-]\d\d)(?::?(\d\d))?$/

/**
 * Rows as pg reads them: a bigint as its decimal string (Prisma gives BigInt), a timestamp as a Date (Drizzle's
 * postgres.js driver turns the client's timestamp parsing off).
 */
export function pgRows(rows: readonly unknown[]): Record<string, unknown>[] {
  return rows.map((row) => {
    const out: Record<string, unknown> = {}
    for (const [key, value] of Object.entries(row as Record<string, unknown>)) out[key] = pgValue(key, value)
    return out
  })
}

function pgValue(key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString()
  if (Array.isArray(value)) return value.map((v: unknown) => (typeof v === 'bigint' ? v.toString() : v))
  if (typeof value === 'string' && TIME_COLUMN.test(key)) {
    const m = TIMESTAMPTZ.exec(value)
    if (m !== null) return new Date(`${m[1]}T${m[2]}${m[3]}:${m[4] ?? '00'}`)
  }
  return value
}
