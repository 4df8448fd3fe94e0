// Prisma (7, with a driver adapter such as @prisma/adapter-pg): the client of an interactive transaction,
// `prisma.$transaction(async (tx) => …)`, through `$queryRawUnsafe`.

import { type RunStatement, type TransactionAdapter, adapter, isFunction, prop } from './adapter.js'
import { pgRows, pgText } from './pg-text.js'

/** Prisma's client or interactive-transaction client, structurally. */
export interface PrismaLike {
  $queryRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>
}

export function isPrisma(tx: unknown): tx is PrismaLike {
  return isFunction(prop(tx, '$queryRawUnsafe'))
}

/**
 * Every value goes as the text pg would send (arrays as array literals): pgonce's statements rely on the server
 * typing each parameter. Prisma 7 with @prisma/adapter-pg passes raw values on to pg as they are (the suite passes
 * without this step too), but how a raw value is typed is Prisma's and each driver adapter's choice, and text is the
 * value least open to it. Rows give a bigint as BigInt: turned into pg's decimal string.
 */
export function prismaRunner(tx: PrismaLike): RunStatement {
  return async (text, values) => {
    try {
      const rows = await tx.$queryRawUnsafe(text, ...values.map(pgText))
      return pgRows(Array.isArray(rows) ? rows : [])
    } catch (err) {
      throw withSqlState(err)
    }
  }
}

/**
 * Prisma wraps the server's error (P2010, "Raw query failed"; its SQLSTATE in `meta.driverAdapterError.cause`, in
 * `meta.code` without a driver adapter); pgonce's errors
 * (a lock or statement timeout) are told apart by that code, as on pg's own errors.
 */
function withSqlState(err: unknown): unknown {
  const cause = prop(prop(prop(err, 'meta'), 'driverAdapterError'), 'cause')
  const code = prop(cause, 'originalCode') ?? prop(cause, 'code') ?? prop(prop(err, 'meta'), 'code')
  if (err instanceof Error && typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && prop(err, 'code') !== code) {
    return Object.assign(new Error(err.message, { cause: err }), { code })
  }
  return err
}

/**
 * Wraps Prisma's interactive-transaction client as a `tx`.
 *
 * ### Examples
 * ```ts
 * await prisma.$transaction(async (tx) => {
 *   const comment = await tx.comment.create({ data: { postId, body } })
 *   await queue.add('push', { commentId: comment.id }, { tx: fromPrisma(tx) })
 * })
 * ```
 */
export function fromPrisma(tx: PrismaLike): TransactionAdapter {
  if (!isPrisma(tx)) throw new TypeError('fromPrisma: expected a Prisma client or interactive-transaction client')
  return adapter('Prisma', prismaRunner(tx))
}
