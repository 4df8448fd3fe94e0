// TypeORM on the postgres driver: the `EntityManager` of `dataSource.transaction(async (manager) => …)`, or a
// `QueryRunner` after `startTransaction()`. Statements go through the runner's `query(text, values, true)`, which
// hands text and values to pg unchanged; the structured result gives the rows whatever the command was (the plain
// result of an UPDATE or DELETE is `[rows, count]`).

import { type RunStatement, type TransactionAdapter, adapter, isFunction, prop } from './adapter.js'

interface QueryRunnerLike {
  query(text: string, values: unknown[], structured: true): Promise<{ records?: unknown[] }>
  release(): Promise<void>
}

/** A TypeORM EntityManager or QueryRunner, structurally. */
export type TypeORMLike =
  | { readonly '@instanceof': symbol; readonly queryRunner?: unknown }
  | { query(...args: never[]): unknown; startTransaction(...args: never[]): unknown; release(): unknown }

/** TypeORM marks its classes with `@instanceof` symbols (its InstanceChecker). */
const marked = (tx: unknown, ...names: string[]): boolean => {
  const mark = prop(tx, '@instanceof')
  return typeof mark === 'symbol' && names.some((n) => mark === Symbol.for(n))
}

const isRunner = (tx: unknown): tx is QueryRunnerLike =>
  isFunction(prop(tx, 'query')) && isFunction(prop(tx, 'startTransaction')) && isFunction(prop(tx, 'release'))

export function isTypeORM(tx: unknown): boolean {
  return marked(tx, 'EntityManager') || (isRunner(tx) && prop(tx, 'manager') !== undefined)
}

async function structured(runner: QueryRunnerLike, text: string, values: readonly unknown[]) {
  return ((await runner.query(text, [...values], true)).records ?? []) as Record<string, unknown>[]
}

export function typeormRunner(tx: object): RunStatement {
  if (isRunner(tx)) return (text, values) => structured(tx, text, values)
  return async (text, values) => {
    // The manager of a transaction has its runner; a DataSource's own manager lends one per statement.
    const own = prop(tx, 'queryRunner')
    if (isRunner(own)) return structured(own, text, values)
    const create = prop(prop(tx, 'dataSource'), 'createQueryRunner')
    if (!isFunction(create)) throw new TypeError('fromTypeORM: this EntityManager has no DataSource')
    const lent = (create as () => QueryRunnerLike).call(prop(tx, 'dataSource'))
    try {
      return await structured(lent, text, values)
    } finally {
      await lent.release()
    }
  }
}

/**
 * Wraps TypeORM's `EntityManager` (of a transaction) or a `QueryRunner` on the postgres driver as a `tx`.
 *
 * ### Examples
 * ```ts
 * await dataSource.transaction(async (manager) => {
 *   const comment = await manager.save(Comment, { postId, body })
 *   await queue.add('push', { commentId: comment.id }, { tx: fromTypeORM(manager) })
 * })
 * ```
 */
export function fromTypeORM(tx: TypeORMLike): TransactionAdapter {
  if (!isTypeORM(tx)) throw new TypeError('fromTypeORM: expected a TypeORM EntityManager or QueryRunner')
  return adapter('TypeORM', typeormRunner(tx))
}
