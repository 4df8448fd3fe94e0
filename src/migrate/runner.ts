// Applies pgonce's migrations to one schema under a transaction-scoped advisory lock.

import type { ConnectionOptions } from '../db/connection.js'
import { inTransaction } from '../db/checkout.js'
import { CONNECTION_OPTION_KEYS, openPool } from '../db/connection.js'
import { checkSchema } from '../db/identifiers.js'
import { fillPlaceholders } from '../db/sql-files.js'
import { SchemaNewerError } from '../errors.js'
import { checkLogger, type Logger } from '../logger.js'
import { checkOptions } from '../validate.js'
import { committedMigrations } from './migrations.js'

export interface MigrateOptions extends ConnectionOptions {
  /** Schema holding pgonce's tables. (Default: `'pgonce'`) */
  schema?: string
  /** A pino-compatible logger. (Default: silent) */
  logger?: Logger
}

const OPTION_KEYS = [...CONNECTION_OPTION_KEYS, 'schema', 'logger'] as const

/**
 * Brings `schema` up to date. Idempotent and safe when many processes call it
 * at once: they queue on an advisory lock held until their transaction ends.
 * Throws a SchemaNewerError, applying nothing, when a newer pgonce migrated the schema.
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
      await client.query(fillPlaceholders(
        `create schema if not exists :PGONCE_SCHEMA;
         create table if not exists :PGONCE_SCHEMA.migrations (
           filename text primary key, hash text not null, applied_at timestamptz not null default now())`, schema))
      const done = await client.query<{ filename: string }>(fillPlaceholders('select filename from :PGONCE_SCHEMA.migrations', schema))
      const have = new Set(done.rows.map((r) => r.filename))
      // A newer pgonce migrated this schema: this version's statements may call what its migrations changed.
      const shipped = new Set(migrations.map((m) => m.filename))
      const unknown = [...have].filter((f) => !shipped.has(f)).sort()
      if (unknown.length > 0) throw new SchemaNewerError(schema, unknown)
      for (const m of migrations) {
        if (have.has(m.filename)) continue
        await client.query(fillPlaceholders(m.body, schema))
        await client.query(fillPlaceholders('insert into :PGONCE_SCHEMA.migrations (filename, hash) values ($1, $2)', schema), [m.filename, m.hash])
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
export async function migrateUntilDone(options: MigrateOptions, stopped: () => boolean, report: (err: Error) => void): Promise<void> {
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
