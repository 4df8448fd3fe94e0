// migrate() on a schema stopped at an earlier migration, with jobs in it: the later migrations apply over its rows.
// Today's case is 000014, which re-types the jobs table's text columns as domains (a table rewrite): the rows, their
// keys and jobIds, the inspection views and the jobs_finished trigger come through, and the limits hold after it.

import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { Queue, Worker, migrate } from '../src/index.js'
import { fillPlaceholders } from '../src/db/sql-files.js'
import { committedMigrations } from '../src/migrate/migrations.js'
import { databaseUrl } from './support/schema.js'

const schema = `t_upgrade_${randomBytes(4).toString('hex')}`
const pool = new pg.Pool({ connectionString: databaseUrl(), max: 2 })

afterAll(async () => {
  await pool.query(`drop schema if exists "${schema}" cascade`)
  await pool.end()
})

/** Applies the committed migrations before `filename` as migrate() would, and records them as applied. */
async function migrateBefore(filename: string): Promise<void> {
  const earlier = committedMigrations().filter((m) => m.filename < filename)
  await pool.query(fillPlaceholders(`create schema :PGONCE_SCHEMA; create table :PGONCE_SCHEMA.migrations (
    filename text primary key, hash text not null, applied_at timestamptz not null default now())`, schema))
  for (const m of earlier) {
    await pool.query(fillPlaceholders(m.body, schema))
    await pool.query(`insert into "${schema}".migrations (filename, hash) values ($1, $2)`, [m.filename, m.hash])
  }
}

describe('migrate over an existing schema', () => {
  it('000014 re-types the text columns of stored jobs: rows, keys, views and the end-of-job trigger come through', async () => {
    const target = committedMigrations().find((m) => m.filename.startsWith('000014'))
    expect(target).toBeDefined()
    await migrateBefore(target!.filename)
    // Rows as the schema before stored them (its own INSERT path: add_job() and a hand-written bulk).
    await pool.query(`select "${schema}".add_job(queue => 'up', name => 'a', job_id => 'j1')`)
    await pool.query(`select "${schema}".add_job(queue => 'up', name => 'b', dedup_id => 'k1')`)
    await pool.query(`insert into "${schema}".jobs (queue, name, data) select 'up', 'bulk', '{}' from generate_series(1, 50)`)
    const before = (await pool.query(`select id, queue, name, job_id, dedup_key from "${schema}".jobs order by id`)).rows

    expect((await migrate({ pool, schema })).applied).toEqual(
      committedMigrations().filter((m) => m.filename >= target!.filename).map((m) => m.filename))
    expect((await pool.query(`select id, queue, name, job_id, dedup_key from "${schema}".jobs order by id`)).rows).toEqual(before)
    const { rows: [types] } = await pool.query(`select pg_typeof(queue)::text as queue, pg_typeof(dedup_key)::text as key
      from "${schema}".jobs limit 1`)
    expect(types).toEqual({ queue: `${schema}.jobs_queue`, key: `${schema}.jobs_dedup_key` })
    expect((await pool.query(`select jobs::int from "${schema}".job_counts where queue = 'up' and state = 'waiting'`)).rows)
      .toEqual([{ jobs: 52 }])
    expect((await pool.query(`select key from "${schema}".held_keys`)).rows).toEqual([{ key: 'k1' }])

    // The duplicate of the stored key and jobId are still answered by them; the limits hold on the new types.
    const queue = new Queue('up', { pool, schema, migrate: false })
    const owner = before.find((r) => r.dedup_key === 'k1')
    expect((await queue.add('b', {}, { deduplication: { id: 'k1' } })).id).toBe(String(owner.id))
    expect((await queue.add('a', {}, { jobId: 'j1' })).id).toBe(String(before[0].id))
    const bad = await pool.query(`update "${schema}".jobs set name = '' where id = $1`, [before[0].id]).catch((e: unknown) => e)
    expect(bad).toMatchObject({ code: '23514', constraint: 'jobs_name_bytes' })

    // The re-created jobs_finished trigger releases the no-TTL key when its owner completes.
    const worker = new Worker('up', async () => {}, { pool, schema, concurrency: 8 })
    worker.on('error', () => {})
    try {
      for (let i = 0; i < 200; i++) {
        const { rows } = await pool.query(`select count(*)::int as n from "${schema}".held_keys`)
        if (rows[0].n === 0) break
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    } finally {
      await worker.close()
    }
    expect((await pool.query(`select count(*)::int as n from "${schema}".held_keys`)).rows).toEqual([{ n: 0 }])
    await queue.close()
  })
})
