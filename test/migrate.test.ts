// migrate(): concurrent runs on a new schema, idempotence, a schema a newer pgonce migrated refused, and an application's
// own graphile-migrate history left alone.

import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, SchemaNewerError, Worker, migrate } from '../src/index.js'
import { committedMigrations } from '../src/migrate/migrations.js'
import { createDatabase } from '../dev/postgres-server.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema
const created: string[] = []

beforeAll(async () => {
  db = await freshSchema('migrate')
})
afterAll(async () => {
  for (const schema of created) await db.pool.query(`drop schema if exists "${schema}" cascade`)
  await db.drop()
})

function newSchemaName(label: string): string {
  const schema = `t_${label}_${randomBytes(4).toString('hex')}`
  created.push(schema)
  return schema
}

async function appliedMigrations(pool: pg.Pool, schema: string): Promise<{ filename: string; n: number }[]> {
  const { rows } = await pool.query(
    `select filename, count(*)::int as n from "${schema}".migrations group by filename order by filename`,
  )
  return rows
}

const expectedFilenames = committedMigrations().map((m) => m.filename)

describe('migrate', () => {
  it('five concurrent calls from separate pools on a new schema all succeed and apply each migration once', async () => {
    const schema = newSchemaName('mig5')
    const pools = Array.from({ length: 5 }, () => new pg.Pool({ connectionString: db.url, max: 1 }))
    try {
      const results = await Promise.all(pools.map((pool) => migrate({ pool, schema })))
      // Exactly one run applied everything; the others found it done.
      const appliedBy = results.filter((r) => r.applied.length > 0)
      expect(appliedBy).toHaveLength(1)
      expect(appliedBy[0]?.applied).toEqual(expectedFilenames)
      expect(results.filter((r) => r.applied.length === 0)).toHaveLength(4)
      expect(await appliedMigrations(db.pool, schema)).toEqual(
        expectedFilenames.map((filename) => ({ filename, n: 1 })),
      )
      // A pool passed in is left open.
      for (const pool of pools) expect((await pool.query('select 1 as one')).rows).toEqual([{ one: 1 }])

      const again = await migrate({ connectionString: db.url, schema })
      expect(again.applied).toEqual([])
      expect(await appliedMigrations(db.pool, schema)).toEqual(
        expectedFilenames.map((filename) => ({ filename, n: 1 })),
      )
      const { rows } = await db.pool.query(`select hash from "${schema}".migrations order by filename`)
      expect(rows.map((r) => r.hash)).toEqual(committedMigrations().map((m) => m.hash))
    } finally {
      await Promise.all(pools.map((p) => p.end()))
    }
  })

  it('five concurrent Queues migrating on first use on one new schema all add', async () => {
    const schema = newSchemaName('first_use')
    const queues = Array.from(
      { length: 5 },
      () => new Queue('first-use', { connectionString: db.url, schema, poolSize: 1 }),
    )
    try {
      const jobs = await Promise.all(queues.map((q, i) => q.add('x', { i })))
      expect(jobs.map((j) => j.outcome)).toEqual(Array(5).fill('added'))
      const { rows } = await db.pool.query(`select count(*)::int as n from "${schema}".jobs`)
      expect(rows[0].n).toBe(5)
      expect(await appliedMigrations(db.pool, schema)).toEqual(
        expectedFilenames.map((filename) => ({ filename, n: 1 })),
      )
    } finally {
      await Promise.all(queues.map((q) => q.close()))
    }
  })

  it('a schema a newer pgonce migrated is refused: migrate(), a Queue and a Worker apply and run nothing', async () => {
    const schema = newSchemaName('newer')
    await migrate({ connectionString: db.url, schema })
    const last = expectedFilenames[expectedFilenames.length - 1] as string
    // As a newer pgonce leaves it: one migration this version does not ship; and one of ours missing, to see that
    // nothing is applied either.
    await db.pool.query(
      `insert into "${schema}".migrations (filename, hash) values ('999999-from-a-newer-pgonce.sql', 'sha1:0')`,
    )
    await db.pool.query(`delete from "${schema}".migrations where filename = $1`, [last])

    const err = await migrate({ connectionString: db.url, schema }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(SchemaNewerError)
    expect(err).toMatchObject({ schema, unknownMigrations: ['999999-from-a-newer-pgonce.sql'] })
    expect(String((err as Error).message)).toContain('999999-from-a-newer-pgonce.sql')
    expect((await appliedMigrations(db.pool, schema)).map((m) => m.filename)).not.toContain(last)

    const queue = new Queue('newer', { connectionString: db.url, schema })
    await db.pool.query(`insert into "${schema}".jobs (queue, name, data) values ('newer', 'by-hand', '{}')`)
    const ran: unknown[] = []
    const errors: unknown[] = []
    const worker = new Worker(
      'newer',
      async (job) => {
        ran.push(job.id)
      },
      { connectionString: db.url, schema },
    )
    worker.on('error', (e) => errors.push(e))
    try {
      await expect(queue.add('x', {})).rejects.toBeInstanceOf(SchemaNewerError)
      await waitFor(
        () => errors.some((e) => e instanceof SchemaNewerError),
        10_000,
        'the worker to report the newer schema',
      )
      // Lets time pass on purpose: a worker that went on regardless would have run the job by now.
      await new Promise((resolve) => setTimeout(resolve, 300))
      expect(ran).toEqual([])
      const { rows } = await db.pool.query(`select name, state from "${schema}".jobs`)
      expect(rows).toEqual([{ name: 'by-hand', state: 'waiting' }])
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('a Queue with migrate: false does not create its schema', async () => {
    const schema = newSchemaName('no_migrate')
    const queue = new Queue('q', { connectionString: db.url, schema, migrate: false })
    try {
      const err = await queue.add('x', {}).catch((e: unknown) => e)
      // invalid_schema_name or undefined_table (its first statement reads <schema>): the schema was not made for us, and the
      // error says how to make it (test/migrate.not-migrated.test.ts).
      expect(err).toMatchObject({ name: 'SetupError', code: 'NOT_MIGRATED' })
      expect(['3F000', '42P01']).toContain((err as { sqlstate?: string }).sqlstate)
      expect(String((err as Error).message)).toContain(schema)
      const { rows } = await db.pool.query('select count(*)::int as n from pg_namespace where nspname = $1', [schema])
      expect(rows[0].n).toBe(0)
    } finally {
      await queue.close()
    }
  })

  it('a Queue whose first-use migration failed tries again on the next call', async () => {
    const schema = newSchemaName('retry')
    // An object in the way makes the initial migration fail (its `create sequence job_ids` collides).
    await db.pool.query(`create schema "${schema}"; create table "${schema}".job_ids (x int)`)
    const queue = new Queue('retry-migrate', { connectionString: db.url, schema })
    try {
      await expect(queue.add('x', {})).rejects.toMatchObject({ code: '42P07' }) // duplicate_table
      expect((await db.pool.query('select to_regclass($1) as t', [`"${schema}".migrations`])).rows[0].t).toBeNull()
      await db.pool.query(`drop table "${schema}".job_ids`)
      const job = await queue.add('x', {})
      expect(job.outcome).toBe('added')
      expect(await appliedMigrations(db.pool, schema)).toEqual(
        expectedFilenames.map((filename) => ({ filename, n: 1 })),
      )
    } finally {
      await queue.close()
    }
  })

  it("in a database of its own: the default schema, and the application's graphile_migrate history untouched", async () => {
    const url = await createDatabase(db.url, `pgonce_migrate_${randomBytes(4).toString('hex')}`)
    const name = new URL(url).pathname.slice(1)
    const pool = new pg.Pool({ connectionString: url, max: 2 })
    // pool.end() resolves before its sockets close: the forced drop below may still terminate one.
    pool.on('error', () => {})
    try {
      // The application's own graphile-migrate bookkeeping, as graphile-migrate lays it out.
      await pool.query(`
        create schema graphile_migrate;
        create table graphile_migrate.migrations (hash text primary key, previous_hash text, filename text not null, date timestamptz not null default now());
        create table graphile_migrate.current (filename text primary key default 'current.sql', content text not null, date timestamptz not null default now());
        insert into graphile_migrate.migrations (hash, previous_hash, filename) values ('sha1:app1', null, '000001.sql'), ('sha1:app2', 'sha1:app1', '000002.sql');
        insert into graphile_migrate.current (content) values ('-- app work in progress');
        create table public.migrations (app text);`)
      const snapshot = async () =>
        (
          await pool.query(`
        select (select json_agg(m order by hash) from graphile_migrate.migrations m) as gm,
               (select json_agg(c) from graphile_migrate.current c) as current,
               (select count(*)::int from public.migrations) as public_rows,
               (select json_agg(relname order by relname) from pg_class where relnamespace = 'graphile_migrate'::regnamespace) as gm_relations,
               (select json_agg(relname order by relname) from pg_class where relnamespace = 'public'::regnamespace) as public_relations`)
        ).rows[0]
      const before = await snapshot()

      const results = await Promise.all(Array.from({ length: 5 }, () => migrate({ connectionString: url })))
      expect(results.flatMap((r) => r.applied)).toEqual(expectedFilenames)
      expect(await appliedMigrations(pool, 'pgonce')).toEqual(expectedFilenames.map((filename) => ({ filename, n: 1 })))
      expect(await snapshot()).toEqual(before)
      const { rows } = await pool.query(
        `select nspname from pg_namespace where nspname not like 'pg\\_%' and nspname <> 'information_schema' order by 1`,
      )
      expect(rows.map((r) => r.nspname)).toEqual(['graphile_migrate', 'pgonce', 'public'])

      const queue = new Queue('default-schema', { connectionString: url })
      try {
        expect(queue.schema).toBe('pgonce')
        await queue.add('x', {})
        expect((await pool.query('select count(*)::int as n from pgonce.jobs')).rows[0].n).toBe(1)
      } finally {
        await queue.close()
      }
    } finally {
      await pool.end()
      await db.pool.query(`drop database if exists "${name}" with (force)`)
    }
  })
})
