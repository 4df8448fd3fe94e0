// Gives each test file its own migrated schema on the test server, dropped afterwards.

import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { inject } from 'vitest'
import { migrate } from '../../src/index.js'

export interface TestSchema {
  /** Connection string of the test server. */
  url: string
  /** A fresh schema, already migrated. */
  schema: string
  /** A pool for the test's own SQL (assertions, backdating). */
  pool: pg.Pool
  /** Drops the schema and ends the pool. */
  drop(): Promise<void>
}

/**
 * `url` with an application_name of its own: a test tells its sessions apart in pg_stat_activity by it (not by the
 * query text, of which pg_stat_activity keeps only the first 1,024 bytes).
 */
export function namedSessionUrl(url: string, applicationName: string): string {
  const named = new URL(url)
  named.searchParams.set('application_name', applicationName)
  return named.href
}

export function databaseUrl(): string {
  return inject('databaseUrl')
}

/** Creates and migrates `t_<label>_<random>`; call in beforeAll, `drop()` in afterAll. */
export async function freshSchema(label: string): Promise<TestSchema> {
  const url = databaseUrl()
  const schema = `t_${label.replace(/[^a-z0-9_]/g, '_').slice(0, 24)}_${randomBytes(4).toString('hex')}`
  await migrate({ connectionString: url, schema })
  const pool = new pg.Pool({ connectionString: url, max: 4 })
  return {
    url,
    schema,
    pool,
    async drop() {
      await pool.query(`drop schema if exists "${schema}" cascade`)
      await pool.end()
    },
  }
}
