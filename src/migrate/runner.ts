// Applies pgonce's migrations to one schema under a transaction-scoped advisory lock.

import type { ConnectionOptions } from '../db/connection.js'
import { inTransaction } from '../db/checkout.js'
import { CONNECTION_OPTION_KEYS, openPool } from '../db/connection.js'
import { checkSchema } from '../db/identifiers.js'
import { fillPlaceholders } from '../db/sql-files.js'
import { SchemaHistoryError, SchemaNewerError } from '../errors.js'
import { checkLogger, type Logger } from '../logger.js'
import { checkOptions } from '../validate.js'
import { type CommittedMigration, committedMigrations, migrationNumber } from './migrations.js'

export interface MigrateOptions extends ConnectionOptions {
  /** Schema holding pgonce's tables. (Default: `'pgonce'`) */
  schema?: string
  /** A pino-compatible logger. (Default: silent) */
  logger?: Logger
}

const OPTION_KEYS = [...CONNECTION_OPTION_KEYS, 'schema', 'logger'] as const

/**
 * Throws, before anything is applied, when the recorded migrations are not a beginning of the shipped ones: a
 * SchemaHistoryError when one has the number of a shipped migration but another name or hash (another history: the
 * one before the baseline, or a baseline changed before release), a SchemaNewerError when the others include
 * migrations this version does not ship (a newer pgonce migrated the schema: this version's statements may call
 * what those changed).
 */
function checkHistory(
  schema: string,
  recorded: { filename: string; hash: string }[],
  shipped: CommittedMigration[],
): void {
  const byNumber = new Map(shipped.map((m) => [migrationNumber(m.filename), m]))
  const inOrder = [...recorded].sort((a, b) => (a.filename < b.filename ? -1 : 1))
  const fork = inOrder.findIndex((r) => {
    const m = byNumber.get(migrationNumber(r.filename))
    return m !== undefined && (m.filename !== r.filename || m.hash !== r.hash)
  })
  // Everything recorded from the first foreign migration on belongs to the other history.
  if (fork >= 0)
    throw new SchemaHistoryError(
      schema,
      inOrder.slice(fork).map((r) => r.filename),
    )
  const names = new Set(shipped.map((m) => m.filename))
  const unknown = inOrder.map((r) => r.filename).filter((f) => !names.has(f))
  if (unknown.length > 0) throw new SchemaNewerError(schema, unknown)
}

/**
 * Brings `schema` up to date. Idempotent and safe when many processes call it
 * at once: they queue on an advisory lock held until their transaction ends.
 * Throws a SchemaNewerError, applying nothing, when a newer pgonce migrated the schema, and a SchemaHistoryError
 * when it was migrated with another history (the migrations before pgonce's baseline).
 * Applied migrations are recorded in `<schema>.migrations`, apart from any
 * graphile-migrate history of your own.
 */
export async function migrate(options: MigrateOptions): Promise<{ applied: string[] }> {
  const opts = checkOptions<MigrateOptions>(options, 'options', OPTION_KEYS)
  const schema = checkSchema(opts.schema, 'options.schema')
  const logger = checkLogger(opts.logger, 'options.logger')
  const migrations = committedMigrations()
  const { pool, owned } = openPool(opts, logger, 1)
  const applied: string[] = []
  try {
    await inTransaction(pool, logger, async (client) => {
      await client.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`pgonce.migrate:${schema}`])
      await client.query(
        fillPlaceholders(
          `create schema if not exists :PGONCE_SCHEMA;
         create table if not exists :PGONCE_SCHEMA.migrations (
           filename text primary key, hash text not null, applied_at timestamptz not null default now())`,
          schema,
        ),
      )
      const done = await client.query<{ filename: string; hash: string }>(
        fillPlaceholders('select filename, hash from :PGONCE_SCHEMA.migrations', schema),
      )
      checkHistory(schema, done.rows, migrations)
      const have = new Set(done.rows.map((r) => r.filename))
      for (const m of migrations) {
        if (have.has(m.filename)) continue
        await client.query(fillPlaceholders(m.body, schema))
        await client.query(
          fillPlaceholders('insert into :PGONCE_SCHEMA.migrations (filename, hash) values ($1, $2)', schema),
          [m.filename, m.hash],
        )
        applied.push(m.filename)
      }
    })
  } finally {
    await owned?.end()
  }
  if (applied.length > 0) logger.info({ schema, applied }, 'pgonce: migrations applied')
  return { applied }
}

/** Longest pause between two attempts of migrateUntilDone. */
const MAX_RETRY_MS = 5_000

/** Migrates, retrying with backoff (each failure reported) while the database is unreachable, until done or `stopped()`. */
export async function migrateUntilDone(
  options: MigrateOptions,
  stopped: () => boolean,
  report: (err: Error) => void,
): Promise<void> {
  for (let retryMs = 100; !stopped(); retryMs = Math.min(retryMs * 2, MAX_RETRY_MS)) {
    try {
      await migrate(options)
      return
    } catch (err) {
      report(err as Error)
      await new Promise((resolve) => setTimeout(resolve, retryMs))
    }
  }
}
