// Reduces every accepted `tx` (pg Pool, PoolClient or Client, Kysely or Kysely Transaction, and the ORMs of
// src/db/adapters/) to one `execute`.

import { randomBytes } from 'node:crypto'
import { fail } from '../validate.js'
import { type OrmTransaction, type TransactionAdapter, adapterRunner } from './adapters/index.js'
import { databaseError } from './database-errors.js'
import type { PreparedQuery } from './prepared.js'

/**
 * Runs one statement with bound parameters and resolves to its rows. A named
 * query is prepared once per pg connection; Kysely runs its text.
 */
export type Execute = <R extends object = Record<string, unknown>>(
  query: string | PreparedQuery,
  values: readonly unknown[],
) => Promise<R[]>

/** A `pg` Pool, PoolClient or Client, structurally. */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>
  query(config: { name?: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>
}

/**
 * The compiled query a Kysely executor runs, structurally: what Kysely's own `CompiledQuery.raw(sql, parameters)`
 * builds (a raw node holding the text, and an id that plugins key their state on). pgonce does not import Kysely.
 */
export interface RawCompiledQuery {
  readonly sql: string
  readonly parameters: readonly unknown[]
  /** Kysely's `RawNode` of the text (typed loosely, so that Kysely's own `executeQuery` signature matches this one). */
  readonly query: unknown
  /** Kysely's `QueryId`. */
  readonly queryId: unknown
}

/**
 * A Kysely instance or transaction, structurally. The parameter is typed `never` so that Kysely's generic
 * `executeQuery` matches whatever its version names its node types; pgonce passes a {@link RawCompiledQuery}.
 */
export interface KyselyExecutor {
  executeQuery(query: never): Promise<{ rows: unknown[] }>
}

type RunRaw = (query: RawCompiledQuery) => Promise<{ rows: unknown[] }>

/**
 * Where a write runs: the caller's connection or transaction. pgonce never sends BEGIN or COMMIT on it. Besides pg
 * and Kysely, Drizzle, Prisma, postgres.js, Knex and TypeORM handles are recognised by their shape, or wrapped by
 * name (docs/transactions.md).
 */
export type Transactional = PgQueryable | KyselyExecutor | TransactionAdapter | OrmTransaction

function isKysely(tx: object): tx is KyselyExecutor {
  return typeof (tx as Partial<KyselyExecutor>).executeQuery === 'function'
}

function rawQuery(sql: string, parameters: readonly unknown[]): RawCompiledQuery {
  return Object.freeze({
    sql,
    parameters: Object.freeze([...parameters]),
    query: Object.freeze({
      kind: 'RawNode' as const,
      sqlFragments: Object.freeze([sql]),
      parameters: Object.freeze([]),
    }),
    queryId: Object.freeze({ queryId: randomBytes(6).toString('base64url') }),
  })
}

/**
 * Builds an `execute` for the caller's `tx`; checked before any I/O. With `named: false`, pg gets the text alone
 * (an unnamed statement, as a transaction-mode PgBouncer needs).
 */
export function executorFor(tx: unknown, field = 'opts.tx', named = true): Execute {
  // postgres.js's `sql` and a Knex transaction are functions.
  if ((typeof tx === 'object' || typeof tx === 'function') && tx !== null) {
    if (isKysely(tx)) {
      return typed(
        async <R extends object>(query: string | PreparedQuery, values: readonly unknown[]) =>
          (
            await (tx.executeQuery as unknown as RunRaw).call(
              tx,
              rawQuery(typeof query === 'string' ? query : query.text, values),
            )
          ).rows as R[],
      )
    }
    const run = adapterRunner(tx)
    if (run !== undefined) {
      return typed(async <R extends object>(query: string | PreparedQuery, values: readonly unknown[]) => {
        return (await run(typeof query === 'string' ? query : query.text, values)) as R[]
      })
    }
    const pg = tx as Partial<PgQueryable>
    if (typeof pg.query === 'function') {
      const q = tx as PgQueryable
      return typed(
        async <R extends object>(query: string | PreparedQuery, values: readonly unknown[]) =>
          (typeof query === 'string' || !named
            ? await q.query(typeof query === 'string' ? query : query.text, [...values])
            : await q.query({ name: query.name, text: query.text, values: [...values] })
          ).rows as R[],
      )
    }
  }
  return fail(
    'INVALID_TYPE',
    field,
    'must be a pg Pool, PoolClient or Client, a Kysely instance or transaction, or a Drizzle, Prisma, postgres.js, Knex or TypeORM transaction (or one wrapped by fromDrizzle, fromPrisma, fromPostgresJs, fromKnex or fromTypeORM)',
  )
}

/** `execute`, with the driver's errors translated (src/db/database-errors.ts): on your connections too. */
function typed(execute: Execute): Execute {
  return async <R extends object>(query: string | PreparedQuery, values: readonly unknown[]) => {
    try {
      return await execute<R>(query, values)
    } catch (err) {
      throw databaseError(err, { text: typeof query === 'string' ? query : query.text })
    }
  }
}
