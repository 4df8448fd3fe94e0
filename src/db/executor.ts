// Reduces every accepted `tx` (pg Pool, PoolClient or Client, Kysely or Kysely Transaction) to one `execute`.

import { CompiledQuery } from 'kysely'
import { fail } from '../validate.js'
import type { PreparedQuery } from './prepared.js'

/**
 * Runs one statement with bound parameters and resolves to its rows. A named
 * query is prepared once per pg connection; Kysely runs its text.
 */
export type Execute = <R extends object = Record<string, unknown>>(query: string | PreparedQuery, values: readonly unknown[]) => Promise<R[]>

/** A `pg` Pool, PoolClient or Client, structurally. */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>
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
      return async <R extends object>(query: string | PreparedQuery, values: readonly unknown[]) =>
        (await tx.executeQuery(CompiledQuery.raw(typeof query === 'string' ? query : query.text, [...values]))).rows as R[]
    }
    const pg = tx as Partial<PgQueryable>
    if (typeof pg.query === 'function') {
      return async <R extends object>(query: string | PreparedQuery, values: readonly unknown[]) =>
        (typeof query === 'string'
          ? await (tx as PgQueryable).query(query, [...values])
          : await (tx as PgQueryable).query({ name: query.name, text: query.text, values: [...values] })).rows as R[]
    }
  }
  return fail('INVALID_TYPE', field, 'must be a pg Pool, PoolClient or Client, or a Kysely instance or transaction')
}
