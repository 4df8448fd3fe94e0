// migrate() on a schema migrated with another history of migrations: the one the baseline replaced
// (test/helpers/legacy-migrations), or a baseline changed after the schema applied it. It is refused with a
// SchemaHistoryError naming the fix, applying nothing, by migrate(), a Queue and a Worker; the fix (drop the schema
// and migrate again) gives a working schema.

import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { Queue, SchemaHistoryError, Worker, migrate } from '../src/index.js'
import { committedMigrations } from '../src/migrate/migrations.js'
import { applyMigrations, legacyMigrations } from './helpers/legacy-history.js'
import { databaseUrl } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'

const pool = new pg.Pool({ connectionString: databaseUrl(), max: 2 })
const created: string[] = []
// Every committed migration, the baseline first.
const allMigrations = committedMigrations().map((m) => m.filename)

afterAll(async () => {
  for (const schema of created) await pool.query(`drop schema if exists "${schema}" cascade`)
  await pool.end()
})

function newSchemaName(label: string): string {
  const schema = `t_${label}_${randomBytes(4).toString('hex')}`
  created.push(schema)
  return schema
}

async function recorded(schema: string): Promise<string[]> {
  const { rows } = await pool.query(`select filename from "${schema}".migrations order by filename`)
  return rows.map((r) => r.filename)
}

describe('a schema migrated with another history', () => {
  it('the history before the baseline: refused, naming the fix, by migrate(), a Queue and a Worker; the fix works', async () => {
    const schema = newSchemaName('legacy')
    const legacy = legacyMigrations()
    await applyMigrations(pool, schema, legacy)
    await pool.query(`select "${schema}".add_job(queue => 'old', name => 'kept', job_id => 'j1')`)

    const err = await migrate({ pool, schema }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(SchemaHistoryError)
    expect(err).toMatchObject({ schema, divergedMigrations: legacy.map((m) => m.filename) })
    expect((err as Error).message).toContain(legacy[0]?.filename)
    expect((err as Error).message).toContain(`drop schema "${schema}" cascade`)
    // Nothing applied, nothing lost.
    expect(await recorded(schema)).toEqual(legacy.map((m) => m.filename))
    expect((await pool.query(`select name from "${schema}".jobs`)).rows).toEqual([{ name: 'kept' }])

    const queue = new Queue('old', { pool, schema })
    const ran: string[] = []
    const errors: unknown[] = []
    const worker = new Worker(
      'old',
      async (job) => {
        ran.push(job.id)
      },
      { pool, schema },
    )
    worker.on('error', (e) => errors.push(e))
    try {
      await expect(queue.add('x', {})).rejects.toBeInstanceOf(SchemaHistoryError)
      await waitFor(
        () => errors.some((e) => e instanceof SchemaHistoryError),
        10_000,
        'the worker to report the history',
      )
      expect(ran).toEqual([])
      expect((await pool.query(`select state from "${schema}".jobs`)).rows).toEqual([{ state: 'waiting' }])
    } finally {
      await worker.close()
      await queue.close()
    }

    await pool.query(`drop schema "${schema}" cascade`)
    expect(await migrate({ pool, schema })).toEqual({ applied: allMigrations })
    const fresh = new Queue('old', { pool, schema, migrate: false })
    try {
      expect((await fresh.add('x', {}, { jobId: 'j1' })).outcome).toBe('added')
    } finally {
      await fresh.close()
    }
  })

  it('a baseline changed after the schema applied it: refused, applying nothing', async () => {
    const schema = newSchemaName('rehashed')
    await migrate({ pool, schema })
    await pool.query(`update "${schema}".migrations set hash = 'sha1:0' where filename = '000001-baseline.sql'`)
    const err = await migrate({ pool, schema }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(SchemaHistoryError)
    // The later migrations chain on the baseline's hash, so they diverge with it.
    expect(err).toMatchObject({ schema, divergedMigrations: allMigrations })
  })
})
