// The node-postgres connection under an ORM, reached where the ORM hands it out: pg encodes pgonce's parameters.

import type { RunStatement } from './adapter.js'
import { isFunction, prop } from './adapter.js'

/** A pg Client, PoolClient or Pool, structurally. */
export interface PgClientLike {
  query(text: string, values: unknown[]): Promise<{ rows: unknown[] }>
}

export function isPgClient(value: unknown): value is PgClientLike {
  return isFunction(prop(value, 'query'))
}

/** Unnamed statements: the connection is the caller's, pgonce leaves no prepared statement on it. */
export function pgClientRunner(client: PgClientLike): RunStatement {
  return async (text, values) => (await client.query(text, [...values])).rows as Record<string, unknown>[]
}
