// queue.add's ways around add_job(). A plain job due now (no jobId, key, dependency or delay) has nothing to decide
// (sql/add-plain-job.sql): into a queue that has due waiting work it is one bare INSERT; into an idle queue it goes
// straight to _insert_job(), which hands it to an idle worker or wakes the workers. The job it returns must be the job
// stored, a worker must still be woken or handed the job whenever the queue was idle, and no job may be lost or run
// twice. A plain duplicate (a key without extend/replace, no jobId, no dependency) whose key is held is answered by
// sql/add-job.sql itself: the owner it returns must be the job stored, and every other add with a key must still be
// decided by add_job().

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, ValidationError, Worker } from '../src/index.js'
import { inTrackedTransaction, listen } from './fixtures/add-probes.js'
import { waitFor } from './fixtures/worker-helpers.js'
import { type TestSchema, freshSchema } from './support/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('add_fast')
})
afterAll(async () => {
  await db.drop()
})

function queueOf<Data = unknown>(name: string): Queue<Data> {
  return new Queue<Data>(name, { connectionString: db.url, schema: db.schema, migrate: false })
}

/** The job's public fields, without the add's own verdict (outcome, deduplicated), which a read does not have. */
function stored(job: object): Record<string, unknown> {
  const { outcome: _o, deduplicated: _d, ...fields } = job as Record<string, unknown>
  return fields
}

describe('queue.add of a plain job due now (sql/add-plain-job.sql)', () => {
  it('skips add_job() and returns the job as stored, whatever its options', async () => {
    const queue = queueOf('fast-one')
    try {
      await inTrackedTransaction(db, async ({ client, addJobCalls, insertJobCalls }) => {
        const first = await queue.add('first', { i: 0 }, { tx: client })
        expect(first.outcome).toBe('added')
        // The queue had no due work: _insert_job() inserted it (a worker may need waking), without add_job().
        expect([await addJobCalls(), await insertJobCalls()]).toEqual([0, 1])

        const cases: { name: string; data: unknown; opts?: Record<string, unknown> }[] = [
          { name: 'nested', data: { b: 1, a: { list: [1, 'two', null, { x: true }] } } },
          { name: 'options', data: { i: 2 }, opts: { priority: 7, attempts: 3, backoff: 250 } },
          { name: 'exponential', data: { i: 3 }, opts: { delay: 0, backoff: { type: 'exponential', delay: 100, jitter: 0.25 } } },
          { name: 'string', data: 'a string' },
          { name: 'undefined', data: undefined },
          { name: 'null', data: null },
        ]
        for (const c of cases) {
          const job = await queue.add(c.name, c.data, { ...c.opts, tx: client })
          expect([job.outcome, job.deduplicated, job.state, job.attempts]).toEqual(['added', false, 'waiting', 0])
          const read = await client.query(`select id::text from "${db.schema}".jobs where id = $1`, [job.id])
          expect(read.rows).toHaveLength(1)
        }
        // Due work was there: bare INSERTs, neither function.
        expect([await addJobCalls(), await insertJobCalls()]).toEqual([0, 1])

        // A jobId, a key, a dependency or a delay still goes through add_job().
        await queue.add('custom', {}, { jobId: 'fast-one-custom', tx: client })
        await queue.add('keyed', {}, { deduplication: { id: 'k' }, tx: client })
        await queue.add('child', {}, { dependsOn: [first.id], tx: client })
        await queue.add('later', {}, { delay: 60_000, tx: client })
        expect(await addJobCalls()).toBe(4)
        await client.query('commit')

        const jobs = await Promise.all(cases.map(async (c) => {
          const { rows } = await db.pool.query(`select id::text from "${db.schema}".jobs where queue = 'fast-one' and name = $1`, [c.name])
          return queue.getJob(rows[0].id as string)
        }))
        // Added again outside the transaction (same options), the returned jobs must equal what a read gives.
        for (const [i, c] of cases.entries()) {
          const job = await queue.add(c.name, c.data, c.opts)
          const read = await queue.getJob(job.id)
          expect(stored(job)).toEqual(stored(read as object))
          expect(job.runAt.getTime()).toBe(job.createdAt.getTime())
          expect(job.data).toEqual(jobs[i]?.data)
        }
        // The returned data is a copy of the caller's, not the caller's object.
        const data = { mutable: [1] }
        const job = await queue.add('copy', data)
        expect(job.data).toEqual(data)
        expect(job.data).not.toBe(data)
      })
    } finally {
      await queue.close()
    }
  })

  it('into an idle queue with an idle worker: handed over by _insert_job(), returned as stored (active, first attempt)', async () => {
    const queue = queueOf('fast-handoff')
    const worker = new Worker('fast-handoff', async () => {}, {
      connectionString: db.url, schema: db.schema, pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false })
    try {
      await worker.run()
      await waitFor(async () => (await db.pool.query(
        `select 1 from "${db.schema}".idle_workers where queue = 'fast-handoff'`)).rows.length > 0, 10_000, 'the worker to sign up')
      await inTrackedTransaction(db, async ({ client, addJobCalls, insertJobCalls }) => {
        const job = await queue.add('handed', { n: 1 }, { priority: 2, attempts: 3, backoff: 100, tx: client })
        expect([await addJobCalls(), await insertJobCalls()]).toEqual([0, 1])
        const { rows: [row] } = await client.query(`select * from "${db.schema}".jobs where id = $1`, [job.id])
        expect(row).toMatchObject({ state: 'active', attempts: 1, locked_by: worker.id, priority: 2, max_attempts: 3 })
        expect(row.lock_token).not.toBeNull()
        expect(row.locked_until.getTime()).toBeGreaterThan(row.created_at.getTime())
        expect([job.state, job.attempts, job.priority, job.maxAttempts, job.backoff, job.data, job.outcome])
          .toEqual(['active', 1, 2, 3, row.backoff, row.data, 'added'])
        expect([job.createdAt.getTime(), job.runAt.getTime()]).toEqual([row.created_at.getTime(), row.run_at.getTime()])
        // Rolled back below: the hand-off and its NOTIFY never happened, and the worker's sign-up is back.
      })
      const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where queue = 'fast-handoff'`)
      expect(rows[0].n).toBe(0)
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('wakes workers only when the queue had no due waiting job, as add_job() does', async () => {
    const queue = queueOf('fast-wake')
    const other = queueOf('fast-wake-other')
    const heard = await listen(db)
    try {
      await queue.add('first', {})
      await heard.mark('m1')
      expect(heard.payloads).toEqual(['fast-wake', 'm1'])

      // Due waiting work is there: whoever added it woke the workers.
      await queue.add('second', {})
      await queue.add('third', {}, { priority: 3 })
      await heard.mark('m2')
      expect(heard.payloads).toEqual(['fast-wake', 'm1', 'm2'])

      // Another queue's due work does not count.
      await other.add('x', {})
      await heard.mark('m3')
      expect(heard.payloads.slice(-2)).toEqual(['fast-wake-other', 'm3'])

      // Only active and delayed jobs left: no due waiting job, so the next add wakes again.
      await db.pool.query(`update "${db.schema}".jobs set state = 'active', locked_until = now() + interval '1 minute',
        lock_token = gen_random_uuid() where queue = 'fast-wake' and name = 'first'`)
      await db.pool.query(`update "${db.schema}".jobs set state = 'delayed', run_at = now() + interval '1 hour'
        where queue = 'fast-wake' and name <> 'first'`)
      await queue.add('fourth', {})
      await heard.mark('m4')
      expect(heard.payloads.slice(-2)).toEqual(['fast-wake', 'm4'])
    } finally {
      await heard.end()
      await queue.close()
      await other.close()
    }
  })

  it('rolls back with the caller\'s transaction, leaving nothing', async () => {
    const queue = queueOf('fast-tx')
    await queue.add('due', {})
    try {
      await inTrackedTransaction(db, async ({ client }) => {
        const job = await queue.add('inside', { i: 1 }, { tx: client })
        await client.query('rollback')
        expect(await queue.getJob(job.id)).toBeNull()
        const { rows } = await db.pool.query(`select name from "${db.schema}".jobs where queue = 'fast-tx'`)
        expect(rows.map((r) => r.name)).toEqual(['due'])
      })
    } finally {
      await queue.close()
    }
  })

  it('16 concurrent producers onto a busy queue: every job runs exactly once', async () => {
    const producers = Array.from({ length: 16 }, () =>
      new Queue<{ p: number; i: number }>('fast-busy', { connectionString: db.url, schema: db.schema, poolSize: 1, migrate: false }))
    const runs = new Map<string, number>()
    const worker = new Worker<{ p: number; i: number }>('fast-busy', async (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 3))
    }, { connectionString: db.url, schema: db.schema, concurrency: 4, pollIntervalMs: 500, maintenanceIntervalMs: 0, migrate: false })
    worker.on('error', () => {})
    try {
      await worker.run()
      const added = await Promise.all(producers.map(async (q, p) => {
        const ids: string[] = []
        for (let i = 0; i < 40; i++) {
          ids.push((await q.add('job', { p, i })).id)
          if (i % 7 === 0) await new Promise((resolve) => setTimeout(resolve, Math.random() * 5))
        }
        return ids
      }))
      const ids = added.flat()
      expect(new Set(ids).size).toBe(640)
      await waitFor(() => ids.every((id) => runs.has(id)), 20_000, 'every job to run')
      await worker.close()
      expect([...runs.values()].every((n) => n === 1)).toBe(true)
      expect(runs.size).toBe(640)
      const { rows } = await db.pool.query(
        `select state, count(*)::int as n from "${db.schema}".jobs where queue = 'fast-busy' group by state`)
      expect(rows).toEqual([{ state: 'completed', n: 640 }])
    } finally {
      await worker.close()
      await Promise.all(producers.map((q) => q.close()))
    }
  }, 60_000)
})

describe('queue.add of a duplicate whose key is held (sql/add-job.sql)', () => {
  it('answers with the owner as stored, without calling add_job()', async () => {
    const queue = queueOf<Record<string, unknown>>('dup-fast')
    try {
      await inTrackedTransaction(db, async ({ client, addJobCalls }) => {
        const owner = await queue.add('owner', { n: 1, nested: { list: [1, 'two', null] } },
          { deduplication: { id: 'ttl-key', ttl: 60_000 }, priority: 4, attempts: 3, backoff: { type: 'exponential', delay: 50 }, tx: client })
        const noTtl = await queue.add('owner', { n: 2 }, { deduplication: { id: 'plain-key' }, tx: client })
        expect([owner.outcome, noTtl.outcome]).toEqual(['added', 'added'])
        expect(await addJobCalls()).toBe(2)

        for (const [key, want] of [['ttl-key', owner], ['plain-key', noTtl]] as const) {
          const dup = await queue.add('other', { n: 3 }, { deduplication: { id: key, ttl: 5_000 }, delay: 10_000, tx: client })
          expect([dup.outcome, dup.deduplicated]).toEqual(['duplicate-key', true])
          expect(stored(dup)).toEqual(stored(want))
        }
        expect(await addJobCalls()).toBe(2)
        expect(queue.outcomes.get('duplicate-key')).toBe(2)
        await client.query('commit')
        // What the duplicate returned equals a read of the owner.
        const dup = await queue.add('other', {}, { deduplication: { id: 'ttl-key' } })
        expect(stored(dup)).toEqual(stored((await queue.getJob(owner.id)) as object))
      })
    } finally {
      await queue.close()
    }
  })

  it('leaves extend, replace, a jobId, a dependency and a key no longer held to add_job()', async () => {
    const queue = queueOf('dup-slow')
    try {
      await inTrackedTransaction(db, async ({ client, addJobCalls }) => {
        const owner = await queue.add('owner', { v: 1 }, { deduplication: { id: 'k', ttl: 60_000 }, tx: client })
        const other = await queue.add('other', {}, { jobId: 'dup-slow-custom', tx: client })
        let calls = await addJobCalls()

        const decidedByAddJob = async (opts: Parameters<Queue['add']>[2], outcome: string): Promise<void> => {
          const job = await queue.add('again', { v: 2 }, { ...opts, tx: client })
          expect(job.outcome).toBe(outcome)
          expect(await addJobCalls()).toBe(++calls)
        }
        await decidedByAddJob({ deduplication: { id: 'k', ttl: 60_000, extend: true } }, 'extended')
        // A live jobId answers first, whatever the key says.
        await decidedByAddJob({ jobId: 'dup-slow-custom', deduplication: { id: 'k', ttl: 60_000 } }, 'duplicate-job-id')
        await decidedByAddJob({ deduplication: { id: 'k', ttl: 60_000 }, dependsOn: [other.id] }, 'duplicate-key')
        // A dependency that does not exist is refused even though the key is held.
        await expect(queue.add('again', {}, { deduplication: { id: 'k', ttl: 60_000 }, dependsOn: ['999999999'], tx: client }))
          .rejects.toSatisfy((err) => err instanceof ValidationError && err.code === 'DEPENDENCY_NOT_FOUND')
        expect(await addJobCalls()).toBe(++calls)
        await decidedByAddJob({ deduplication: { id: 'k', ttl: 60_000, replace: true } }, 'replaced')

        // A TTL key past its expiry is not held: the add creates a new job.
        await client.query(`update "${db.schema}".dedup_keys set expires_at = now() - interval '1 second' where queue = 'dup-slow' and key = 'k'`)
        const fresh = await queue.add('again', { v: 3 }, { deduplication: { id: 'k', ttl: 60_000 }, tx: client })
        expect(fresh.outcome).toBe('added')
        expect(fresh.id).not.toBe(owner.id)
        expect(await addJobCalls()).toBe(++calls)
      })
    } finally {
      await queue.close()
    }
  })

  it('answers every duplicate of one key with one job under 16 concurrent producers', async () => {
    const queue = queueOf('dup-race')
    try {
      const jobs = await Promise.all(Array.from({ length: 16 }, (_, p) => (async () => {
        const seen = []
        for (let i = 0; i < 10; i++) seen.push(await queue.add('job', { p, i }, { deduplication: { id: 'one', ttl: 60_000 } }))
        return seen
      })()))
      const all = jobs.flat()
      expect(new Set(all.map((j) => j.id)).size).toBe(1)
      expect(all.filter((j) => j.outcome === 'added')).toHaveLength(1)
      const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where queue = 'dup-race'`)
      expect(rows[0].n).toBe(1)
    } finally {
      await queue.close()
    }
  })
})
