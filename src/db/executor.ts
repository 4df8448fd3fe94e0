// Reduces every accepted `tx` (pg Pool, PoolClient or Client, Kysely or Kysely Transaction) to one `execute`.

import { CompiledQuery } from 'kysely'
import { fail } from '../validate.js'

/** Runs one statement with bound parameters and resolves to its rows. */
export type Execute = <R extends object = Record<string, unknown>>(text: string, values: readonly unknown[]) => Promise<R[]>

/** A `pg` Pool, PoolClient or Client, structurally. */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>
}

/** A Kysely instance or transaction, structurally. */
export interface KyselyExecutor {
  executeQuery(query: CompiledQuery): Promise<{ rows: unknown[] }>
}

/** Where a write runs: the caller's connection or transaction. pgonce never sends BEGIN or COMMIT on it. */
export type Transactional = PgQueryable | KyselyExecutor

function isKysely(tx: object): tx is KyselyExecutor {
  return typeof (tx as Partial<KyselyExecutor>).executeQuery === 'function'
}

/** Builds an `execute` for the caller's `tx`; checked before any I/O. */
export function executorFor(tx: unknown, field = 'opts.tx'): Execute {
  if (typeof tx === 'object' && tx !== null) {
    if (isKysely(tx)) {
      return async <R extends object>(text: string, values: readonly unknown[]) =>
        (await tx.executeQuery(CompiledQuery.raw(text, [...values]))).rows as R[]
    }
    const pg = tx as Partial<PgQueryable>
    if (typeof pg.query === 'function') {
      return async <R extends object>(text: string, values: readonly unknown[]) =>
        (await (tx as PgQueryable).query(text, [...values])).rows as R[]
    }
  }
  return fail('INVALID_TYPE', field, 'must be a pg Pool, PoolClient or Client, or a Kysely instance or transaction')
}
