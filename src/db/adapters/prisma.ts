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
 * Prisma types raw parameters from their JavaScript values (a number as an integer or a double, an array by its
 * first element); pgonce's statements rely on the server typing them, as it does for pg's text parameters. So every
 * value goes as text (arrays as array literals), which Prisma passes on as text. Its rows give a bigint as BigInt:
 * turned into pg's decimal string.
 */
function prismaRunner(tx: PrismaLike): RunStatement {
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

export { prismaRunner }
