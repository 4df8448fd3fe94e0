// runMaintenance: rescues expired leases (attempt counted, failed when none is left), sweeps expired keys, claims and idle-worker sign-ups, promotes stranded dependents; one runner at a time.

import { randomUUID } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, runMaintenance } from '../src/index.js'
import { sqlFor } from '../src/db/sql-files.js'
import { newTokenPrefix } from '../src/worker/job-store.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { storedJob } from './helpers/jobs.js'
import { backendPid } from './helpers/clients.js'
import { waitUntilBlockedBehind } from './helpers/wait.js'

let db: TestSchema
let queue: Queue

beforeAll(async () => {
  db = await freshSchema('maintenance')
  queue = new Queue('maint', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

/** Marks job `id` as claimed `attempts` times by a worker whose lease ran out `agoMs` ago. */
async function leaseExpired(id: string, attempts: number, agoMs = 1_000): Promise<void> {
  await db.pool.query(
    `update "${db.schema}".jobs set state = 'active', attempts = $2, lock_token = gen_random_uuid(), locked_by = 'dead-worker',
       started_at = now(), locked_until = now() - make_interval(secs => $3 / 1000.0) where id = $1`,
    [id, attempts, agoMs],
  )
}

describe('runMaintenance', () => {
  it('rescues expired leases: back to waiting with the run counted; out of attempts, one more run, then failed (key released)', async () => {
    const retry = await queue.add('r', {}, { attempts: 3 })
    const last = await queue.add('l', {}, { attempts: 2, deduplication: { id: 'maint-key' } })
    const alive = await queue.add('a', {}, { attempts: 3 })
    await leaseExpired(retry.id, 1)
    await leaseExpired(last.id, 2)
    await leaseExpired(alive.id, 1, -60_000) // lease still has a minute to run

    const result = await runMaintenance({ connectionString: db.url, schema: db.schema })
    expect(result).toMatchObject({ rescued: 2, ran: true })

    expect(await storedJob(db, retry.id)).toMatchObject({
      state: 'waiting',
      attempts: 1,
      stalls: 1,
      lock_token: null,
      locked_by: null,
    })
    expect((await storedJob(db, retry.id)).last_error).toMatch(/lease expired: worker dead-worker/)
    // its attempts are used up, but a crashed worker is not the job's failure: it runs once more
    expect(await storedJob(db, last.id)).toMatchObject({ state: 'waiting', attempts: 2, stalls: 1, lock_token: null })
    expect(await queue.getDeduplicationJobId('maint-key')).toBe(last.id)
    expect((await storedJob(db, alive.id)).state).toBe('active')

    // the run after that dies too: failed, so that a job that kills its worker cannot loop
    await leaseExpired(last.id, 2)
    expect(await runMaintenance({ connectionString: db.url, schema: db.schema })).toMatchObject({ rescued: 1 })
    const failed = await storedJob(db, last.id)
    expect(failed).toMatchObject({ state: 'failed', attempts: 2, stalls: 2, lock_token: null })
    expect(failed.finished_at).not.toBeNull()
    expect(await queue.getDeduplicationJobId('maint-key')).toBeNull()
    const { rowCount } = await db.pool.query(`select 1 from "${db.schema}".dedup_keys where key = 'maint-key'`)
    expect(rowCount).toBe(0)
  })

  it('deletes expired TTL dedup keys and expired execution claims, keeping live ones', async () => {
    const job = await queue.add('k', {}, { deduplication: { id: 'ttl-live', ttl: 60_000 } })
    const old = await queue.add('k', {}, { deduplication: { id: 'ttl-dead', ttl: 60_000 } })
    await db.pool.query(
      `update "${db.schema}".dedup_keys set expires_at = now() - interval '1 second' where key = 'ttl-dead'`,
    )
    await db.pool.query(
      `insert into "${db.schema}".execution_claims (key, state, token, expires_at) values
         ('claim-dead', 'running', gen_random_uuid(), now() - interval '1 second'),
         ('claim-live', 'running', gen_random_uuid(), now() + interval '1 hour'),
         ('done-forever', 'done', null, null)`,
    )
    const result = await runMaintenance({ pool: db.pool, schema: db.schema })
    expect(result).toMatchObject({ expiredKeys: 1, expiredClaims: 1 })
    const { rows: keys } = await db.pool.query<{ key: string }>(
      `select key from "${db.schema}".dedup_keys where key like 'ttl-%' order by key`,
    )
    expect(keys.map((k) => k.key)).toEqual(['ttl-live'])
    const { rows: claims } = await db.pool.query<{ key: string }>(
      `select key from "${db.schema}".execution_claims order by key`,
    )
    expect(claims.map((c) => c.key)).toEqual(['claim-live', 'done-forever'])
    expect(job.id).not.toBe(old.id)
  })

  it('runs one at a time: a second runner returns at once while another is inside a batch; a runner that dies lets go at once', async () => {
    const holder = new pg.Client({ connectionString: db.url })
    holder.on('error', () => {})
    await holder.connect()
    await holder.query('begin')
    await holder.query(sqlFor('try-maintenance-lock', db.schema), [db.schema, randomUUID()])
    const job = await queue.add('x', {}, { attempts: 2 })
    await leaseExpired(job.id, 1)
    const blocked = await runMaintenance({ pool: db.pool, schema: db.schema })
    expect(blocked).toEqual({
      rescued: 0,
      expiredKeys: 0,
      expiredClaims: 0,
      promoted: 0,
      pruned: 0,
      prunedEffects: 0,
      prunedLimits: 0,
      ran: false,
    })
    expect((await storedJob(db, job.id)).state).toBe('active')
    // the other runner's backend dies inside its batch (killed worker, lost connection): its lock goes with it
    await db.pool.query('select pg_terminate_backend($1)', [backendPid(holder)])
    await holder.end().catch(() => {})
    expect(await runMaintenance({ pool: db.pool, schema: db.schema })).toMatchObject({ rescued: 1, ran: true })
  })

  it('two parents completing in concurrent transactions: the second waits for the first on the dependent, then promotes it', async () => {
    const [p1, p2] = await queue.addBulk([
      { name: 'p', data: {} },
      { name: 'p', data: {} },
    ])
    const child = await queue.add('c', {}, { dependsOn: [p1!.id, p2!.id] })
    const { rows: claimed } = await db.pool.query<{ id: string; lock_token: string }>(sqlFor('claim-jobs', db.schema), [
      'maint',
      100,
      60_000,
      'test',
      newTokenPrefix(),
      -2147483648,
      '-100000000000000000',
      '0',
      null,
    ])
    const token = (id: string) => claimed.find((r) => r.id === id)!.lock_token
    const a = new pg.Client({ connectionString: db.url })
    const b = new pg.Client({ connectionString: db.url })
    await Promise.all([a.connect(), b.connect()])
    try {
      await a.query('begin')
      await b.query('begin')
      await a.query(sqlFor('complete-jobs', db.schema), [[p1!.id], [token(p1!.id)], [null]])
      // b's completion of the other parent waits on the dependent's row lock until a commits, then sees p1 completed.
      const second = b.query(sqlFor('complete-jobs', db.schema), [[p2!.id], [token(p2!.id)], [null]])
      await waitUntilBlockedBehind(db.pool, backendPid(a), "b's completion to wait for a's")
      expect((await storedJob(db, child.id)).state).toBe('waiting-children')
      await a.query('commit')
      await second
      await b.query('commit')
    } finally {
      await Promise.all([a.end(), b.end()])
    }
    expect((await storedJob(db, child.id)).state).toBe('waiting')
  })

  it('promotes a dependent left in waiting-children although every parent completed (the safety net)', async () => {
    const [p1] = await queue.addBulk([{ name: 'p', data: {} }])
    const child = await queue.add('c', {}, { dependsOn: [p1!.id] })
    // As if the promotion had been lost: the parent completed behind the trigger's back.
    await db.pool.query(`alter table "${db.schema}".jobs disable trigger jobs_finished`)
    try {
      await db.pool.query(`update "${db.schema}".jobs set state = 'completed', finished_at = now() where id = $1`, [
        p1!.id,
      ])
    } finally {
      await db.pool.query(`alter table "${db.schema}".jobs enable trigger jobs_finished`)
    }
    expect((await storedJob(db, child.id)).state).toBe('waiting-children')
    const result = await runMaintenance({ pool: db.pool, schema: db.schema })
    expect(result.promoted).toBe(1)
    expect((await storedJob(db, child.id)).state).toBe('waiting')
  })
})
