// postgres.js (`postgres`): `sql`, a `sql.begin` transaction or a `sql.savepoint`, through `sql.unsafe`.

import { type RunStatement, type TransactionAdapter, adapter, isFunction, prop } from './adapter.js'
import { pgText, pgRows } from './pg-text.js'

/** The unknown type: the server types each parameter from the statement, as it does for pg's parameters. */
const UNKNOWN_OID = 705

/** postgres.js's `Sql` or `TransactionSql`, structurally (pgonce does not import postgres.js). */
export interface PostgresJsLike {
  unsafe(query: string, parameters: never[], options?: { prepare?: boolean }): PromiseLike<readonly unknown[]>
  typed(value: never, oid: number): unknown
}

export function isPostgresJs(tx: unknown): tx is PostgresJsLike {
  return isFunction(tx) && isFunction(prop(tx, 'unsafe')) && isFunction(prop(tx, 'typed'))
}

/**
 * Each value goes as pg would send it: its text, of unknown type. Left to itself, postgres.js serialises by the
 * type the server describes, and so JSON-encodes pgonce's JSON text a second time (a `jsonb` string, not the object).
 * Unnamed (`prepare: false`), as pgonce runs on any connection it does not own.
 */
export function postgresJsRunner(sql: PostgresJsLike): RunStatement {
  return async (text, values) =>
    pgRows(
      await sql.unsafe(text, values.map((v) => sql.typed(pgText(v) as never, UNKNOWN_OID)) as never[], {
        prepare: false,
      }),
    )
}

/**
 * Wraps postgres.js's `sql`, or the `sql` of `sql.begin(async (sql) => …)` / `sql.savepoint(…)`, as a `tx`.
 *
 * ### Examples
 * ```ts
 * await sql.begin(async (tx) => {
 *   await tx`insert into comments ${tx(comment)}`
 *   await queue.add('push', { commentId: comment.id }, { tx: fromPostgresJs(tx) })
 * })
 * ```
 */
export function fromPostgresJs(sql: PostgresJsLike): TransactionAdapter {
  if (!isPostgresJs(sql)) throw new TypeError('fromPostgresJs: expected postgres.js `sql` or a `sql.begin` transaction')
  return adapter('postgres.js', postgresJsRunner(sql))
}
