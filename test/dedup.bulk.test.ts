// addBulk with dedup keys: the decision table of docs/deduplication.md item by item in input order, last replace wins, any rejection rolls back the batch.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type BulkItem, DeduplicationError, Queue } from '../src/index.js'
import { type DedupTables, closeDedupSuite, openDedupSuite } from './helpers/dedup-fixture.js'
import type { TestSchema } from './helpers/schema.js'

type Payload = { v: string }

const QUEUE = 'dedup-bulk'
const TTL = 3_600_000

let db: TestSchema
let queue: Queue<Payload>
let t: DedupTables<Payload>
let seq = 0

beforeAll(async () => ({ db, queue, t } = await openDedupSuite<Payload>('dedup_bulk', QUEUE)))
afterAll(() => closeDedupSuite({ db, queue }))

const newKey = (label: string) => `${label}:${++seq}`

const everything = () =>
  Promise.all([
    t.sql('select * from $S.jobs order by id'),
    t.sql('select * from $S.dedup_keys order by queue, key'),
    t.sql('select * from $S.job_dependencies order by job_id, depends_on'),
  ])

const item = (
  v: string,
  deduplication?: { id: string; ttl?: number; extend?: boolean; replace?: boolean },
): BulkItem<Payload> => ({ name: 'push', data: { v }, opts: deduplication === undefined ? {} : { deduplication } })

describe('addBulk applies the key rules item by item, in input order', () => {
  it('a repeated key answers with the first item, whatever keys sort between them', async () => {
    const a = newKey('b-order')
    const z = newKey('z-order')
    const jobs = await queue.addBulk([
      item('z1', { id: z, ttl: TTL }),
      item('a1', { id: a, ttl: TTL }),
      item('plain'),
      item('z2', { id: z, ttl: TTL }),
      item('a2', { id: a, ttl: TTL, extend: true }),
    ])
    expect(jobs.map((j) => j.outcome)).toEqual(['added', 'added', 'added', 'duplicate-key', 'extended'])
    expect(jobs.map((j) => j.data.v)).toEqual(['z1', 'a1', 'plain', 'z1', 'a1'])
    expect(jobs[3]?.id).toBe(jobs[0]?.id)
    expect(jobs[4]?.id).toBe(jobs[1]?.id)
    expect(jobs[3]?.deduplicated).toBe(true)
    expect(await t.keyOwner(z)).toBe(jobs[0]?.id)
    expect(await t.keyOwner(a)).toBe(jobs[1]?.id)
    expect(await t.jobsWithKey(z)).toHaveLength(1)
  })

  it('items sharing a jobId under different keys are answered in input order', async () => {
    const j = newKey('shared-job-id')
    const z = newKey('z-key')
    const a = newKey('a-key')
    const withJobId = (v: string, id: string): BulkItem<Payload> => ({
      name: 'push',
      data: { v },
      opts: { jobId: j, deduplication: { id, ttl: TTL } },
    })
    const jobs = await queue.addBulk([
      withJobId('first', z),
      withJobId('second', a),
      { name: 'push', data: { v: 'third' }, opts: { jobId: j } },
    ])
    expect(jobs.map((x) => x.outcome)).toEqual(['added', 'duplicate-job-id', 'duplicate-job-id'])
    expect(jobs.map((x) => x.data.v)).toEqual(['first', 'first', 'first'])
    expect(await t.keyOwner(z)).toBe(jobs[0]?.id)
    expect(await t.keyOwner(a)).toBeUndefined()
  })

  it('a key held before the batch answers its items like single adds', async () => {
    const key = newKey('held-before')
    const owner = await queue.add('push', { v: 'owner' }, { deduplication: { id: key, ttl: TTL } })
    const jobs = await queue.addBulk([item('x', { id: key, ttl: TTL }), item('y', { id: key, ttl: TTL, extend: true })])
    expect(jobs.map((j) => [j.id, j.outcome])).toEqual([
      [owner.id, 'duplicate-key'],
      [owner.id, 'extended'],
    ])
    expect(jobs.map((j) => j.data)).toEqual([{ v: 'owner' }, { v: 'owner' }])
  })

  it('an expired key is taken by the first item of the batch', async () => {
    const key = newKey('expired-before')
    const old = await queue.add('push', { v: 'old' }, { deduplication: { id: key, ttl: TTL } })
    await t.expire(key)
    const jobs = await queue.addBulk([item('new', { id: key, ttl: TTL }), item('dup', { id: key, ttl: TTL })])
    expect(jobs.map((j) => j.outcome)).toEqual(['added', 'duplicate-key'])
    expect(jobs[0]?.id).not.toBe(old.id)
    expect(jobs[1]?.id).toBe(jobs[0]?.id)
    expect(await t.keyOwner(key)).toBe(jobs[0]?.id)
  })
})

describe('several replaces of one key in a batch', () => {
  it("leave only the last generation runnable, with the last item's data", async () => {
    const key = newKey('replaces')
    const other = newKey('other')
    const jobs = await queue.addBulk([
      item('r1', { id: key, ttl: TTL, replace: true }),
      item('o1', { id: other, ttl: TTL }),
      item('r2', { id: key, ttl: TTL, replace: true }),
      item('r3', { id: key, ttl: TTL, replace: true, extend: true }),
    ])
    expect(jobs.map((j) => j.outcome)).toEqual(['added', 'added', 'replaced', 'replaced'])
    expect(new Set(jobs.map((j) => j.id)).size).toBe(4)
    const last = jobs[3]
    expect(await t.jobsWithKey(key)).toEqual([{ id: last?.id, state: 'waiting', data: { v: 'r3' } }])
    expect(await t.keyOwner(key)).toBe(last?.id)
    for (const gone of [jobs[0], jobs[2]]) expect(await queue.getJob(gone?.id as string)).toBeNull()
  })

  it('on an active owner: the owner keeps running, only the last generation is queued', async () => {
    const key = newKey('replaces-active')
    const owner = await queue.add('push', { v: 'running' }, { deduplication: { id: key, ttl: TTL } })
    await t.makeActive(owner.id)
    const jobs = await queue.addBulk([
      item('r1', { id: key, ttl: TTL, replace: true }),
      item('r2', { id: key, ttl: TTL, replace: true }),
    ])
    expect(jobs.map((j) => j.outcome)).toEqual(['replaced', 'replaced'])
    expect(await t.jobsWithKey(key)).toEqual([
      { id: owner.id, state: 'active', data: { v: 'running' } },
      { id: jobs[1]?.id, state: 'waiting', data: { v: 'r2' } },
    ])
    expect(await t.keyOwner(key)).toBe(jobs[1]?.id)
  })
})

describe('a rejection inside a batch rolls back the whole batch', () => {
  it('EXTEND_NOT_PENDING: no job, key or extension from the batch remains', async () => {
    const held = newKey('active-owner')
    const owner = await queue.add('push', { v: 'running' }, { deduplication: { id: held, ttl: TTL } })
    await t.makeActive(owner.id)
    const extendable = newKey('extendable')
    await queue.add('push', { v: 'pending' }, { deduplication: { id: extendable, ttl: 60_000 } })
    const fresh = newKey('fresh')
    const before = await everything()

    const err = await queue
      .addBulk([
        item('plain'),
        item('fresh', { id: fresh, ttl: TTL }),
        item('ext-ok', { id: extendable, ttl: TTL, extend: true }),
        item('replace-x', { id: newKey('fresh-replace'), ttl: TTL, replace: true }),
        item('ext-bad', { id: held, ttl: TTL, extend: true }),
      ])
      .catch((e: unknown) => e)

    expect(err).toBeInstanceOf(DeduplicationError)
    expect((err as DeduplicationError).code).toBe('EXTEND_NOT_PENDING')
    expect((err as DeduplicationError).message).toContain('Duplicate unique_key (extended TTL)')
    expect((err as DeduplicationError).key).toBe(held)
    expect((err as DeduplicationError).ownerId).toBe(owner.id)
    expect(await everything()).toEqual(before)
    expect(await t.keyOwner(fresh)).toBeUndefined()
  })

  it('REPLACE_HAS_DEPENDENTS: nothing from the batch remains', async () => {
    const key = newKey('with-dependent')
    const owner = await queue.add('push', { v: 'owner' }, { deduplication: { id: key, ttl: TTL } })
    await queue.add('child', { v: 'child' }, { dependsOn: [owner.id] })
    const before = await everything()
    const err = await queue
      .addBulk([
        item('fresh', { id: newKey('fresh'), ttl: TTL }),
        item('replace', { id: key, ttl: TTL, replace: true }),
        item('plain'),
      ])
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(DeduplicationError)
    expect((err as DeduplicationError).code).toBe('REPLACE_HAS_DEPENDENTS')
    expect(await everything()).toEqual(before)
  })

  it('the rejected batch leaves the queue usable: the same batch without the bad item succeeds', async () => {
    const key = newKey('retry-batch')
    const jobs = await queue.addBulk([item('a', { id: key, ttl: TTL }), item('b', { id: key, ttl: TTL, extend: true })])
    expect(jobs.map((j) => j.outcome)).toEqual(['added', 'extended'])
  })
})
