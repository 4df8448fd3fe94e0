// The migration history the baseline replaced (test/helpers/legacy-migrations), applied as pgonce's runner applied it.

import { fileURLToPath } from 'node:url'
import type pg from 'pg'
import { fillPlaceholders } from '../../src/db/sql-files.js'
import { type CommittedMigration, readMigrations } from '../../src/migrate/migrations.js'

/**
 * The old history, verbatim (its hash chain is checked as the runner checks the shipped one), followed by every
 * migration folded into the baseline since, as the further steps they were written as.
 */
export function legacyMigrations(): CommittedMigration[] {
  return readMigrations(fileURLToPath(new URL('./legacy-migrations/', import.meta.url)))
}

/**
 * Builds `schema` from `migrations` in one transaction and records each in `<schema>.migrations`, as the runner did
 * before the baseline: what a database migrated by then holds.
 */
export async function applyMigrations(pool: pg.Pool, schema: string, migrations: CommittedMigration[]): Promise<void> {
  const client = await pool.connect()
  try {
    await client.query('begin')
    await client.query(
      fillPlaceholders(
        `create schema if not exists :PGONCE_SCHEMA;
      create table if not exists :PGONCE_SCHEMA.migrations (
        filename text primary key, hash text not null, applied_at timestamptz not null default now())`,
        schema,
      ),
    )
    for (const m of migrations) {
      await client.query(fillPlaceholders(m.body, schema))
      await client.query(
        fillPlaceholders('insert into :PGONCE_SCHEMA.migrations (filename, hash) values ($1, $2)', schema),
        [m.filename, m.hash],
      )
    }
    await client.query('commit')
  } catch (err) {
    await client.query('rollback')
    throw err
  } finally {
    client.release()
  }
}
