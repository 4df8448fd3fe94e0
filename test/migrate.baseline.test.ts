// The baseline migration builds the schema the history it replaced builds: the same catalog (test/helpers/catalog.sql
// says what is compared) from migrate() as from test/helpers/legacy-migrations applied in order, each side followed
// by the migrations shipped after the baseline.

import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { migrate } from '../src/index.js'
import { committedMigrations } from '../src/migrate/migrations.js'
import { catalogOf } from './helpers/catalog.js'
import { applyMigrations, legacyMigrations } from './helpers/legacy-history.js'
import { databaseUrl } from './helpers/schema.js'

const pool = new pg.Pool({ connectionString: databaseUrl(), max: 2 })
const suffix = randomBytes(4).toString('hex')
const fromHistory = `t_history_${suffix}`
const fromBaseline = `t_baseline_${suffix}`

afterAll(async () => {
  await pool.query(`drop schema if exists "${fromHistory}" cascade; drop schema if exists "${fromBaseline}" cascade`)
  await pool.end()
})

describe('the baseline migration', () => {
  it('is the first shipped migration, and the fixture holds the history it replaced, verbatim', () => {
    expect(committedMigrations()[0]?.filename).toBe('000001-baseline.sql')
    // legacyMigrations() checks the files' hash chain: their hashes are the ones the schemas migrated with them hold.
    const legacy = legacyMigrations()
    expect(legacy.slice(0, 2).map((m) => [m.filename, m.hash])).toEqual([
      ['000001-schema.sql', 'sha1:cbe55149915d30247b28f29dcc8c13a7fdf8cd2c'],
      ['000002-add_plain_jobs-addbulk-fast-path-for-plain-items.sql', 'sha1:728d7e0ac6f996346c6a66347330c34e7c79a36e'],
    ])
    expect(legacy.length).toBeGreaterThanOrEqual(19)
  })

  it('builds the catalog the replaced history builds, and the later migrations build on both alike', async () => {
    const later = committedMigrations().slice(1)
    await applyMigrations(pool, fromHistory, [...legacyMigrations(), ...later])
    await migrate({ pool, schema: fromBaseline })

    const history = await catalogOf(pool, fromHistory)
    const baseline = await catalogOf(pool, fromBaseline)
    // Both sides were read: a query that found nothing would compare equal.
    expect(new Set(history.map((e) => e.kind))).toEqual(
      new Set([
        'column',
        'composite type',
        'constraint',
        'domain',
        'enum',
        'function',
        'index',
        'relation',
        'rows',
        'sequence',
        'trigger',
        'view',
      ]),
    )
    expect(history.find((e) => e.kind === 'relation' && e.name === 'jobs')?.def).toMatch(
      /autovacuum_vacuum_scale_factor=/,
    )
    expect(baseline).toEqual(history)
  })
})
