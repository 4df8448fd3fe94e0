// Drizzle ORM on node-postgres or postgres.js: the database or a transaction (`db.transaction(async (tx) => …)`),
// through the driver connection its session holds.

import { type RunStatement, type TransactionAdapter, adapter, isFunction, prop } from './adapter.js'
import { isPgClient, pgClientRunner } from './pg-client.js'
import { isPostgresJs, postgresJsRunner } from './postgres-js.js'

/** A Drizzle database or transaction, structurally: its session's `client` is the driver's connection. */
export interface DrizzleLike {
  execute(query: never): unknown
  readonly session?: unknown
}

export function isDrizzle(tx: unknown): tx is DrizzleLike {
  return (
    isFunction(prop(tx, 'execute')) &&
    isFunction(prop(tx, 'transaction')) &&
    prop(prop(tx, 'session'), 'client') !== undefined
  )
}

/**
 * Drizzle's `sql` template spreads an array into several parameters (pg-boss#830) and its drivers parse timestamps
 * their own way; its session's client (node-postgres: the transaction's PoolClient; postgres.js: the transaction's
 * `sql`) runs pgonce's statements as that driver does without Drizzle. Tested with the version package.json pins.
 */
export function drizzleRunner(tx: DrizzleLike): RunStatement | undefined {
  const client = prop(prop(tx, 'session'), 'client')
  if (isPostgresJs(client)) return postgresJsRunner(client)
  if (isPgClient(client)) return pgClientRunner(client)
  return undefined
}

/**
 * Wraps a Drizzle database or transaction (drivers `drizzle-orm/node-postgres` and `drizzle-orm/postgres-js`) as a `tx`.
 *
 * ### Examples
 * ```ts
 * await db.transaction(async (tx) => {
 *   const [comment] = await tx.insert(comments).values({ postId, body }).returning()
 *   await queue.add('push', { commentId: comment.id }, { tx: fromDrizzle(tx) })
 * })
 * ```
 */
export function fromDrizzle(tx: DrizzleLike): TransactionAdapter {
  const run = isDrizzle(tx) ? drizzleRunner(tx) : undefined
  if (run === undefined) {
    throw new TypeError(
      'fromDrizzle: expected a Drizzle database or transaction on the node-postgres or postgres.js driver',
    )
  }
  return adapter('Drizzle', run)
}
