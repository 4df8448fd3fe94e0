// Allow-lists for the identifiers pgonce puts into SQL text (schema) or channels (queue).

import { fail } from '../validate.js'

const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,47}$/
const QUEUE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/

/** The default schema of pgonce's tables. */
export const DEFAULT_SCHEMA = 'pgonce'

/** A schema name: lower-case letters, digits and `_`, at most 48 characters, not `pg_*`. */
export function checkSchema(value: unknown, field = 'schema'): string {
  if (value === undefined) return DEFAULT_SCHEMA
  if (
    typeof value !== 'string' ||
    !SCHEMA_PATTERN.test(value) ||
    value.startsWith('pg_') ||
    value === 'information_schema'
  ) {
    fail('INVALID_IDENTIFIER', field, 'must match [a-z_][a-z0-9_]{0,47} and not be a system schema')
  }
  return value
}

/** A queue name: letters, digits and `_ . : -`, starting with a letter or digit, at most 128 characters. */
export function checkQueueName(value: unknown, field = 'queue'): string {
  if (typeof value !== 'string' || !QUEUE_PATTERN.test(value)) {
    fail('INVALID_IDENTIFIER', field, 'must match [A-Za-z0-9][A-Za-z0-9_.:-]{0,127}')
  }
  return value
}

/** The LISTEN/NOTIFY channel of a schema. */
export function channelOf(schema: string): string {
  return `pgonce:${schema}`
}
