// Knex on the pg client: a transaction (`knex.transaction(async (trx) => …)`) or the instance itself, through the
// connection Knex's client gives out. `trx.raw` is not used: its `?` placeholders would have to be rewritten from
// pgonce's `$n`, and a `?` in a statement's text is then ambiguous.

import { type RunStatement, type TransactionAdapter, adapter, isFunction, prop } from './adapter.js'
import { isPgClient } from './pg-client.js'

/** A Knex instance or transaction, structurally. */
export interface KnexLike {
  raw(...args: never[]): unknown
  readonly client: {
    acquireConnection(): unknown
    releaseConnection(connection: unknown): unknown
  }
}

export function isKnex(tx: unknown): tx is KnexLike {
  const client = prop(tx, 'client')
  return (
    isFunction(tx) &&
    isFunction(prop(tx, 'raw')) &&
    isFunction(prop(client, 'acquireConnection')) &&
    isFunction(prop(client, 'releaseConnection'))
  )
}

/**
 * A transaction's client gives out the transaction's connection and keeps it on release; an instance's lends one
 * of its pool for the one statement (which then commits on its own).
 */
export function knexRunner(knex: KnexLike): RunStatement {
  return async (text, values) => {
    const connection: unknown = await knex.client.acquireConnection()
    try {
      if (!isPgClient(connection)) throw new TypeError('fromKnex: Knex must use the pg client (`client: "pg"`)')
      return (await connection.query(text, [...values])).rows as Record<string, unknown>[]
    } finally {
      await knex.client.releaseConnection(connection)
    }
  }
}

/**
 * Wraps a Knex transaction (or instance) on the `pg` client as a `tx`.
 *
 * ### Examples
 * ```ts
 * await knex.transaction(async (trx) => {
 *   const [comment] = await trx('comments').insert({ post_id: postId, body }).returning('id')
 *   await queue.add('push', { commentId: comment.id }, { tx: fromKnex(trx) })
 * })
 * ```
 */
export function fromKnex(trx: KnexLike): TransactionAdapter {
  if (!isKnex(trx)) throw new TypeError('fromKnex: expected a Knex instance or transaction')
  return adapter('Knex', knexRunner(trx))
}
