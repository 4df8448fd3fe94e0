// Dedup adds inside the caller's transaction: a rollback leaves no job and no key change; a commit publishes both.

import type pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../src/index.js'
import { type DedupTables, closeDedupSuite, openDedupSuite } from './helpers/dedup-fixture.js'
import type { TestSchema } from './helpers/schema.js'
import { waitUntilBlockedBehind } from './helpers/wait.js'

type Payload = { v: string }

const QUEUE = 'dedup-rollback'
const TTL = 3_600_000

let db: TestSchema
let queue: Queue<Payload>
let t: DedupTables<Payload>
let seq = 0

beforeAll(async () => ({ db, queue, t } = await openDedupSuite<Payload>('dedup_rollback', QUEUE)))
afterAll(() => closeDedupSuite({ db, queue }))

const newKey = (label: string) => `${label}:${++seq}`

const jobCount = async () => Number((await t.sql<{ n: string }>('select count(*) as n from $S.jobs'))[0]?.n)

/** Runs `work` inside BEGIN … ROLLBACK on a client of the test pool. */
async function rolledBack(work: (tx: pg.PoolClient) => Promise<unknown>): Promise<void> {
  const tx = await db.pool.connect()
  try {
    await tx.query('begin')
    await work(tx)
    await tx.query('rollback')
  } finally {
    tx.release()
  }
}

describe('a dedup add in a rolled-back transaction', () => {
  for (const ttl of [TTL, undefined]) {
    it(`leaves no key and no job (${ttl === undefined ? 'no TTL' : 'TTL'})`, async () => {
      const key = newKey('rollback-add')
      const before = await jobCount()
      let inside: string | undefined
      await rolledBack(async (tx) => {
        const job = await queue.add(
          'push',
          { v: 'x' },
          { tx, deduplication: ttl === undefined ? { id: key } : { id: key, ttl } },
        )
        expect(job.outcome).toBe('added')
        inside = job.id
        // Visible inside the transaction, invisible outside it.
        expect(
          (await tx.query(`select job_id from "${db.schema}".dedup_keys where queue = $1 and key = $2`, [QUEUE, key]))
            .rows,
        ).toEqual([{ job_id: job.id }])
        expect(await queue.getDeduplicationJobId(key)).toBeNull()
      })
      expect(inside).toBeDefined()
      expect(await t.key(key)).toBeUndefined()
      expect(await jobCount()).toBe(before)
      expect(await queue.getJob(inside as string)).toBeNull()
      const next = await queue.add('push', { v: 'y' }, { deduplication: { id: key, ttl: TTL } })
      expect(next.outcome).toBe('added')
    })
  }

  it('undoes a replace: the old owner is back and still owns the key', async () => {
    const key = newKey('rollback-replace')
    const owner = await queue.add('push', { v: 'first' }, { deduplication: { id: key, ttl: TTL } })
    const keyBefore = await t.key(key)
    await rolledBack(async (tx) => {
      const next = await queue.add('push', { v: 'latest' }, { tx, deduplication: { id: key, ttl: TTL, replace: true } })
      expect(next.outcome).toBe('replaced')
    })
    expect(await t.key(key)).toEqual(keyBefore)
    expect((await queue.getJob(owner.id))?.data).toEqual({ v: 'first' })
    expect(await t.sql('select id from $S.jobs where dedup_key = $1', [key])).toEqual([{ id: owner.id }])
  })

  it('undoes an extend: expires_at is as it was', async () => {
    const key = newKey('rollback-extend')
    await queue.add('push', { v: 'first' }, { deduplication: { id: key, ttl: 60_000 } })
    const keyBefore = await t.key(key)
    await rolledBack(async (tx) => {
      const ext = await queue.add('push', { v: 'x' }, { tx, deduplication: { id: key, ttl: TTL, extend: true } })
      expect(ext.outcome).toBe('extended')
    })
    expect(await t.key(key)).toEqual(keyBefore)
  })

  it('undoes a bulk: neither the jobs nor their keys remain', async () => {
    const keys = [newKey('rollback-bulk'), newKey('rollback-bulk')]
    const before = await jobCount()
    await rolledBack(async (tx) => {
      const jobs = await queue.addBulk(
        keys.map((id) => ({ name: 'push', data: { v: id }, opts: { deduplication: { id, ttl: TTL } } })),
        { tx },
      )
      expect(jobs.map((j) => j.outcome)).toEqual(['added', 'added'])
    })
    for (const key of keys) expect(await t.key(key)).toBeUndefined()
    expect(await jobCount()).toBe(before)
  })
})

describe('a concurrent add of a key an open transaction is taking', () => {
  for (const ending of ['rollback', 'commit'] as const) {
    it(`waits for that transaction, then decides on what it did (${ending})`, async () => {
      const key = newKey(`concurrent-${ending}`)
      const tx = await db.pool.connect()
      try {
        await tx.query('begin')
        const pid = (await tx.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid as number
        const mine = await queue.add('push', { v: 'in-tx' }, { tx, deduplication: { id: key, ttl: TTL } })
        const racing = queue.add('push', { v: 'outside' }, { deduplication: { id: key, ttl: TTL } })
        await waitUntilBlockedBehind(db.pool, pid, 'the concurrent add to wait for the open transaction')
        await tx.query(ending)
        const other = await racing
        if (ending === 'rollback') {
          expect(other.outcome).toBe('added')
          expect(other.data).toEqual({ v: 'outside' })
          expect(await queue.getJob(mine.id)).toBeNull()
        } else {
          expect(other.outcome).toBe('duplicate-key')
          expect(other.id).toBe(mine.id)
        }
        expect((await t.key(key))?.job_id).toBe(other.id)
        expect(await t.sql('select id from $S.jobs where dedup_key = $1', [key])).toEqual([{ id: other.id }])
      } finally {
        tx.release()
      }
    })
  }
})
