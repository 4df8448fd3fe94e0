// Fault suite, lock_timeout and statement_timeout hitting pgonce's own statements while another session holds a
// lock on a jobs row or a dedup key. Guarantee: the call fails with an error that says what happened (a
// QueryTimeoutError keeping the SQLSTATE: 55P03 lock_not_available, 57014 query_canceled), nothing is half-written (no job, no key, no moved key, nothing of a batch), and the same call
// succeeds once the lock is gone. With `tx`, the caller's transaction is aborted by the failed statement (25P02 on
// its next statement) and they must roll it back: nothing of theirs or pgonce's is committed. A worker whose
// completion times out reports it and retries: the job completes once.

import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as pgonce from '../../src/index.js'
import { Queue, Worker } from '../../src/index.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'
import { connectClient, releaseClient } from '../helpers/clients.js'
import { waitFor } from '../helpers/wait.js'

let db: TestSchema
let holder: pg.Client

beforeAll(async () => {
  db = await freshSchema('fault_timeouts')
  holder = await connectClient(db.url)
})
afterAll(async () => {
  await releaseClient(holder)
  await db?.drop()
})

/** The test server's URL with a server setting for every session (libpq `options`). */
const withSetting = (setting: string) =>
  `${db.url}${db.url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c ${setting}`)}`

const snapshot = async (queue: string) =>
  (
    await db.pool.query(
      `select (select count(*)::int from "${db.schema}".jobs where queue = $1) as jobs,
          (select coalesce(json_agg(json_build_object('key', key, 'job', job_id::text, 'expires', expires_at) order by key), '[]')
             from "${db.schema}".dedup_keys where queue = $1) as keys`,
      [queue],
    )
  ).rows[0]

async function failure(fn: () => Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await fn()
  } catch (err) {
    return err as Error & { code?: string }
  }
  throw new Error('expected the call to fail')
}

/** Holds row locks from another session: FOR UPDATE on the rows `sql` selects, until `release()`. */
async function holdLock(sql: string, values: unknown[]): Promise<{ release: () => Promise<void> }> {
  await holder.query('begin')
  const { rowCount } = await holder.query(sql, values)
  expect(rowCount).toBeGreaterThan(0)
  return { release: async () => void (await holder.query('rollback')) }
}

describe.each([
  ['lock_timeout', 'lock_timeout=300', '55P03'],
  ['statement_timeout', 'statement_timeout=300', '57014'],
] as const)('%s on pgonce statements', (_what, setting, sqlstate) => {
  const qname = `timeouts-${sqlstate}`
  let queue: Queue
  beforeAll(async () => {
    // One connection, warmed with a replace first: under statement_timeout, a cold session's first replace (parsing
    // and planning add_job()'s plpgsql) must not be what times out when the test expects it to succeed (a loaded CI
    // machine once took over 150 ms for it).
    queue = new Queue(qname, { connectionString: withSetting(setting), schema: db.schema, migrate: false, poolSize: 1 })
    await queue.add('warm', {}, { deduplication: { id: 'warm-up' } })
    await queue.add('warm', {}, { deduplication: { id: 'warm-up', replace: true } })
  })
  afterAll(async () => {
    await queue?.close()
  })

  it('replace on a dedup key whose row another session locks: fails with the SQLSTATE, nothing moved, succeeds after', async () => {
    const owner = await queue.add('owner', { v: 1 }, { deduplication: { id: 'held-key' } })
    const lock = await holdLock(`select 1 from "${db.schema}".dedup_keys where queue = $1 and key = $2 for update`, [
      qname,
      'held-key',
    ])
    const before = await snapshot(qname)
    const err = await failure(() => queue.add('new', { v: 2 }, { deduplication: { id: 'held-key', replace: true } }))
    expect(err.code).toBe(sqlstate)
    expect(await snapshot(qname)).toEqual(before)
    await lock.release()
    const after = await queue.add('new', { v: 2 }, { deduplication: { id: 'held-key', replace: true } })
    expect(after).toMatchObject({ outcome: 'replaced' })
    expect(await queue.getDeduplicationJobId('held-key')).toBe(after.id)
    expect(await queue.getJob(owner.id)).toBeNull()
  })

  it('a jobId another session is inserting: fails with the SQLSTATE, no row; then answered with the committed one', async () => {
    const other = new Queue(qname, { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      await holder.query('begin')
      const first = await other.add('first', {}, { jobId: `pending-${sqlstate}`, tx: holder })
      const before = await snapshot(qname)
      const err = await failure(() => queue.add('second', {}, { jobId: `pending-${sqlstate}` }))
      expect(err.code).toBe(sqlstate)
      await holder.query('commit')
      expect((await snapshot(qname)).jobs).toBe(before.jobs + 1) // the committed first one, nothing of the second
      expect(await queue.add('second', {}, { jobId: `pending-${sqlstate}` })).toMatchObject({
        id: first.id,
        outcome: 'duplicate-job-id',
      })
    } finally {
      await holder.query('rollback').catch(() => {})
      await other.close()
    }
  })

  it('addBulk blocked on one key of the batch: fails, and nothing of the batch stays', async () => {
    await queue.add('owner', {}, { deduplication: { id: 'bulk-held' } })
    const lock = await holdLock(`select 1 from "${db.schema}".dedup_keys where queue = $1 and key = $2 for update`, [
      qname,
      'bulk-held',
    ])
    const before = await snapshot(qname)
    const err = await failure(() =>
      queue.addBulk([
        { name: 'a', data: {} },
        { name: 'b', data: {}, opts: { jobId: `bulk-${sqlstate}-b` } },
        { name: 'c', data: {}, opts: { deduplication: { id: `bulk-${sqlstate}-c` } } },
        { name: 'd', data: {}, opts: { deduplication: { id: 'bulk-held', replace: true } } },
      ]),
    )
    expect(err.code).toBe(sqlstate)
    expect(await snapshot(qname)).toEqual(before)
    await lock.release()
  })

  it("with tx: the caller's transaction is aborted (25P02 next), and after their rollback nothing is written", async () => {
    await queue.add('owner', {}, { deduplication: { id: 'tx-held' } })
    const caller = new pg.Client({ connectionString: withSetting(setting) })
    await caller.connect()
    const lock = await holdLock(`select 1 from "${db.schema}".dedup_keys where queue = $1 and key = $2 for update`, [
      qname,
      'tx-held',
    ])
    try {
      const before = await snapshot(qname)
      await caller.query('begin')
      await caller.query(`create temp table mine (x int)`)
      await queue.add('in-tx-first', {}, { tx: caller })
      const err = await failure(() =>
        queue.add('in-tx', {}, { deduplication: { id: 'tx-held', replace: true }, tx: caller }),
      )
      expect(err.code).toBe(sqlstate)
      // What the caller sees: their transaction is aborted; every statement fails until they roll back.
      expect((await failure(() => caller.query('select 1'))).code).toBe('25P02')
      await caller.query('rollback')
      expect(await snapshot(qname)).toEqual(before)
      expect((await caller.query(`select to_regclass('pg_temp.mine') as t`)).rows[0].t).toBeNull()
    } finally {
      await lock.release()
      await caller.end()
    }
  })

  it('a worker whose completion times out on a locked jobs row: reports it, retries, the job completes once', async () => {
    const completions: string[] = []
    const errors: (Error & { code?: string })[] = []
    let handled = 0
    let open!: () => void
    const gate = new Promise<void>((r) => (open = r))
    const wq = `${qname}-worker`
    const producer = new Queue(wq, { connectionString: db.url, schema: db.schema, migrate: false })
    const worker = new Worker(
      wq,
      async () => {
        handled++
        await gate
        return 'ok'
      },
      {
        connectionString: withSetting(setting),
        schema: db.schema,
        pollIntervalMs: 100,
        maintenanceIntervalMs: 0,
        migrate: false,
      },
    )
    worker.on('completed', (job) => completions.push(job.id))
    worker.on('error', (err) => errors.push(err))
    try {
      const job = await producer.add('w', {})
      await waitFor(() => handled === 1, 10_000, 'the worker to start the job')
      await holder.query('begin')
      await holder.query(`select 1 from "${db.schema}".jobs where id = $1 for update`, [job.id])
      open()
      await waitFor(() => errors.some((e) => e.code === sqlstate), 10_000, 'the completion to time out')
      await holder.query('commit')
      await waitFor(() => completions.includes(job.id), 10_000, 'the completion to go through')
      expect(handled).toBe(1)
      expect(completions).toEqual([job.id])
      const { rows } = await db.pool.query(`select state, attempts, result from "${db.schema}".jobs where id = $1`, [
        job.id,
      ])
      expect(rows[0]).toEqual({ state: 'completed', attempts: 1, result: 'ok' })
    } finally {
      open()
      await holder.query('rollback').catch(() => {})
      await worker.close()
      await producer.close()
    }
  })

  // A typed error, exported (instanceof works whatever the driver: pg or Kysely), keeping the SQLSTATE in `code`,
  // naming the statement, the driver's error as `cause`.
  it('the failure is a QueryTimeoutError keeping the SQLSTATE and naming the statement, also through Kysely', async () => {
    await queue.add('owner', {}, { deduplication: { id: 'typed-held' } })
    const lock = await holdLock(`select 1 from "${db.schema}".dedup_keys where queue = $1 and key = $2 for update`, [
      qname,
      'typed-held',
    ])
    const kysely = new Kysely<unknown>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: withSetting(setting), max: 1 }) }),
    })
    try {
      const err = await failure(() => queue.add('new', {}, { deduplication: { id: 'typed-held', replace: true } }))
      expect(err).toBeInstanceOf(pgonce.QueryTimeoutError)
      // A replace outside a caller's transaction may end a cached key: its statement also says how long to wait after
      // the commit (sql/add-job-ending.sql, docs/redis.md).
      expect(err).toMatchObject({ code: sqlstate, statement: 'add-job-ending' })
      expect((err as pgonce.QueryTimeoutError).cause).toMatchObject({ code: sqlstate })
      expect(err.message).toContain(sqlstate === '55P03' ? 'lock_timeout' : 'statement_timeout')
      const viaKysely = await failure(() =>
        kysely
          .transaction()
          .execute((trx) => queue.add('new', {}, { deduplication: { id: 'typed-held', replace: true }, tx: trx })),
      )
      expect(viaKysely).toBeInstanceOf(pgonce.QueryTimeoutError)
      expect(viaKysely).toMatchObject({ code: sqlstate })
    } finally {
      await lock.release()
      await kysely.destroy()
    }
  })
})
