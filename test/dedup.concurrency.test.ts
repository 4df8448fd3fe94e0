// Concurrent adds of one dedup key from 50 Queues with their own connections: one job, one runnable replacement, no stray errors.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeduplicationError, type Job, Queue } from '../src/index.js'
import { DedupTables } from './helpers/dedup-fixture.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

type Payload = { caller: number }

const QUEUE = 'dedup-concurrency'
const CALLERS = 50
const TTL = 3_600_000

let db: TestSchema
let queues: Queue<Payload>[] = []
let t: DedupTables<Payload>

/** Opens the Queue's one connection now, waiting out a server that is briefly full of other tests' clients. */
async function warmUp(queue: Queue<Payload>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await queue.getDeduplicationJobId('warm-up')
      return
    } catch (err) {
      if ((err as { code?: string }).code !== '53300' || attempt >= 30) throw err
      await new Promise((r) => setTimeout(r, 500))
    }
  }
}

beforeAll(async () => {
  db = await freshSchema('dedup_concurrency')
  t = new DedupTables<Payload>(db, QUEUE)
  queues = Array.from(
    { length: CALLERS },
    () => new Queue<Payload>(QUEUE, { connectionString: db.url, schema: db.schema, migrate: false, poolSize: 1 }),
  )
  for (const q of queues) await warmUp(q)
}, 180_000)

afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()))
  await db?.drop()
})

function count<T extends string>(values: T[]): Partial<Record<T, number>> {
  const out: Partial<Record<T, number>> = {}
  for (const v of values) out[v] = (out[v] ?? 0) + 1
  return out
}

/** Every caller adds at once, each on its own Queue and connection. */
function allAtOnce(add: (q: Queue<Payload>, caller: number) => Promise<Job<Payload>>) {
  return Promise.allSettled(queues.map((q, caller) => add(q, caller)))
}

function fulfilled(results: PromiseSettledResult<Job<Payload>>[]): Job<Payload>[] {
  const rejected = results.filter((r) => r.status === 'rejected')
  expect(rejected.map((r) => String(r.reason))).toEqual([])
  return results.map((r) => (r as PromiseFulfilledResult<Job<Payload>>).value)
}

describe('50 concurrent adds of one key', () => {
  for (const ttl of [TTL, undefined]) {
    it(`create one job and answer all 50 with its id (${ttl === undefined ? 'no TTL' : 'TTL'})`, async () => {
      const key = `plain-${ttl ?? 'none'}`
      const jobs = fulfilled(
        await allAtOnce((q, caller) =>
          q.add('push', { caller }, { deduplication: ttl === undefined ? { id: key } : { id: key, ttl } }),
        ),
      )

      // One row: the losers' provisional rows are gone.
      const rows = await t.jobsWithKey(key)
      expect(rows).toHaveLength(1)
      const owner = rows[0] as { id: string; data: Payload }
      expect(new Set(jobs.map((j) => j.id))).toEqual(new Set([owner.id]))
      expect(count(jobs.map((j) => j.outcome as string))).toEqual({ added: 1, 'duplicate-key': CALLERS - 1 })
      // Everyone sees the stored data of the one job, not their own.
      expect(new Set(jobs.map((j) => JSON.stringify(j.data)))).toEqual(new Set([JSON.stringify(owner.data)]))
      expect(await t.keyOwner(key)).toBe(owner.id)
    })
  }
})

describe('50 concurrent replaces of one key', () => {
  const prepared = {
    'key absent': async (_key: string) => null,
    'owner pending': async (key: string) =>
      (queues[0] as Queue<Payload>).add('push', { caller: -1 }, { deduplication: { id: key, ttl: TTL } }),
    'owner active': async (key: string) => {
      const owner = await (queues[0] as Queue<Payload>).add(
        'push',
        { caller: -1 },
        { deduplication: { id: key, ttl: TTL } },
      )
      await t.makeActive(owner.id)
      return owner
    },
  }
  for (const [situation, prepare] of Object.entries(prepared)) {
    it(`leave exactly one runnable job, holding one caller's data, and the key pointing at it (${situation})`, async () => {
      const key = `replace-${situation.replace(' ', '-')}`
      const previous = await prepare(key)
      const jobs = fulfilled(
        await allAtOnce((q, caller) =>
          q.add('push', { caller }, { deduplication: { id: key, ttl: TTL, replace: true } }),
        ),
      )

      const rows = await t.jobsWithKey(key)
      const runnable = rows.filter((r) => r.state === 'waiting')
      expect(runnable).toHaveLength(1)
      const winner = runnable[0] as { id: string; data: Payload }
      expect(await t.keyOwner(key)).toBe(winner.id)
      // The winner holds the data of one of the calls, and that call was answered with it.
      const caller = winner.data.caller
      expect(caller).toBeGreaterThanOrEqual(0)
      expect(caller).toBeLessThan(CALLERS)
      expect(jobs[caller]?.id).toBe(winner.id)
      expect(jobs[caller]?.data).toEqual({ caller })
      // Every call inserted its own job: each was answered with a new row, never with another's.
      expect(new Set(jobs.map((j) => j.id)).size).toBe(CALLERS)
      for (const [i, job] of jobs.entries()) expect(job.data).toEqual({ caller: i })
      const outcomes = count(jobs.map((j) => j.outcome as string))
      if (previous === null) expect(outcomes).toEqual({ added: 1, replaced: CALLERS - 1 })
      else expect(outcomes).toEqual({ replaced: CALLERS })
      // Nothing else is left: the superseded pending rows were deleted, a running owner keeps running.
      if (situation === 'owner active') {
        expect(rows.map((r) => r.state).sort()).toEqual(['active', 'waiting'])
        expect(rows.find((r) => r.state === 'active')?.id).toBe(previous?.id)
      } else {
        expect(rows).toHaveLength(1)
      }
    })
  }
})

describe('mixed concurrent extend and plain adds', () => {
  it('owner pending: no errors, every call is answered by the owner', async () => {
    const key = 'mixed-pending'
    const owner = await (queues[0] as Queue<Payload>).add(
      'push',
      { caller: -1 },
      { deduplication: { id: key, ttl: 60_000 } },
    )
    const jobs = fulfilled(
      await allAtOnce((q, caller) =>
        q.add('push', { caller }, { deduplication: { id: key, ttl: TTL, extend: caller % 2 === 0 } }),
      ),
    )
    expect(new Set(jobs.map((j) => j.id))).toEqual(new Set([owner.id]))
    expect(count(jobs.map((j) => j.outcome as string))).toEqual({ extended: CALLERS / 2, 'duplicate-key': CALLERS / 2 })
    expect((await t.jobsWithKey(key)).map((r) => r.id)).toEqual([owner.id])
    expect(await t.msLeft(key)).toBeGreaterThan(TTL - 120_000)
  })

  it('key absent: one job is added, every other call is answered by it, no errors', async () => {
    const key = 'mixed-absent'
    const jobs = fulfilled(
      await allAtOnce((q, caller) =>
        q.add('push', { caller }, { deduplication: { id: key, ttl: TTL, extend: caller % 2 === 0 } }),
      ),
    )
    const rows = await t.jobsWithKey(key)
    expect(rows).toHaveLength(1)
    expect(new Set(jobs.map((j) => j.id))).toEqual(new Set([rows[0]?.id]))
    const outcomes = count(jobs.map((j) => j.outcome as string))
    expect(outcomes.added).toBe(1)
    expect((outcomes.extended ?? 0) + (outcomes['duplicate-key'] ?? 0)).toBe(CALLERS - 1)
    // Only extends can have extended, only plain adds can be plain duplicates.
    for (const [caller, job] of jobs.entries()) {
      if (job.outcome === 'extended') expect(caller % 2).toBe(0)
      if (job.outcome === 'duplicate-key') expect(caller % 2).toBe(1)
    }
  })

  it('owner active: every extend is rejected with EXTEND_NOT_PENDING, every plain add gets the owner', async () => {
    const key = 'mixed-active'
    const owner = await (queues[0] as Queue<Payload>).add(
      'push',
      { caller: -1 },
      { deduplication: { id: key, ttl: TTL } },
    )
    await t.makeActive(owner.id)
    const results = await allAtOnce((q, caller) =>
      q.add('push', { caller }, { deduplication: { id: key, ttl: TTL, extend: caller % 2 === 0 } }),
    )
    for (const [caller, result] of results.entries()) {
      if (caller % 2 === 0) {
        expect(result.status).toBe('rejected')
        const err = (result as PromiseRejectedResult).reason as DeduplicationError
        expect(err).toBeInstanceOf(DeduplicationError)
        expect(err.code).toBe('EXTEND_NOT_PENDING')
        expect(err.ownerId).toBe(owner.id)
      } else {
        expect(result.status).toBe('fulfilled')
        expect((result as PromiseFulfilledResult<Job<Payload>>).value.id).toBe(owner.id)
      }
    }
    expect((await t.jobsWithKey(key)).map((r) => r.id)).toEqual([owner.id])
  })

  it('replaces racing plain adds and extends: one runnable job owns the key', async () => {
    const key = 'mixed-replace'
    const jobs = fulfilled(
      await allAtOnce((q, caller) =>
        q.add(
          'push',
          { caller },
          { deduplication: { id: key, ttl: TTL, replace: caller % 3 === 0, extend: caller % 3 === 1 } },
        ),
      ),
    )
    const rows = await t.jobsWithKey(key)
    expect(rows).toHaveLength(1)
    const winner = rows[0] as { id: string; data: Payload }
    expect(await t.keyOwner(key)).toBe(winner.id)
    expect(jobs[winner.data.caller]?.id).toBe(winner.id)
    for (const job of jobs) expect(['added', 'replaced', 'extended', 'duplicate-key']).toContain(job.outcome)
  })
})
