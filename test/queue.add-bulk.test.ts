// addBulk (docs/deduplication.md#addbulk): one statement, all or nothing, results in input order, no deadlocks between batches.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeduplicationError, Queue, ValidationError } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('add_bulk')
})
afterAll(async () => {
  await db.drop()
})

async function countJobs(queue: string): Promise<number> {
  const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where queue = $1`, [queue])
  return rows[0].n
}

/** A Queue on a pool of our own whose `query` calls are counted. */
function countedQueue(name: string): { queue: Queue<{ i: number }>; pool: pg.Pool; calls: () => number } {
  const pool = new pg.Pool({ connectionString: db.url, max: 2 })
  let calls = 0
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown
  ;(pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    calls++
    return query(...args)
  }
  return { queue: new Queue(name, { pool, schema: db.schema, migrate: false }), pool, calls: () => calls }
}

describe('addBulk', () => {
  it('adds 10,000 items in one statement, results in input order with their data', async () => {
    const { queue, pool, calls } = countedQueue('bulk-10k')
    try {
      const items = Array.from({ length: 10_000 }, (_, i) => ({
        name: `n${i % 7}`,
        data: { i },
        // Every tenth item takes the per-item path (jobId), the rest the set-based insert.
        ...(i % 10 === 0 ? { opts: { jobId: `bulk-10k-${i}`, priority: i % 3 } } : {}),
      }))
      const jobs = await queue.addBulk(items)
      expect(calls()).toBe(1)
      expect(jobs).toHaveLength(10_000)
      jobs.forEach((job, i) => {
        expect(job.data).toEqual({ i })
        expect(job.name).toBe(`n${i % 7}`)
        expect(job.outcome).toBe('added')
        expect(job.jobId).toBe(i % 10 === 0 ? `bulk-10k-${i}` : null)
      })
      expect(new Set(jobs.map((j) => j.id)).size).toBe(10_000)
      expect(await countJobs('bulk-10k')).toBe(10_000)
      const { rows } = await db.pool.query(
        `select count(*)::int as n from "${db.schema}".jobs where queue = 'bulk-10k' and id = any($1::bigint[]) and (data->>'i')::int = $2`,
        [[jobs[1234]?.id], 1234],
      )
      expect(rows[0].n).toBe(1)
    } finally {
      await queue.close()
      await pool.end()
    }
  }, 180_000) // add_jobs() joins its set-based insert quadratically today: ~5 s idle, far more on a loaded machine

  it('an empty batch writes nothing and sends nothing', async () => {
    const { queue, pool, calls } = countedQueue('bulk-empty')
    try {
      expect(await queue.addBulk([])).toEqual([])
      expect(calls()).toBe(0)
    } finally {
      await queue.close()
      await pool.end()
    }
  })

  it('one invalid item rejects the whole batch with ValidationError naming items[i] and writes nothing', async () => {
    const queue = new Queue('bulk-invalid', { connectionString: db.url, schema: db.schema })
    try {
      const good = Array.from({ length: 5 }, (_, i) => ({ name: 'ok', data: { i } }))
      const cases: [unknown, string, string][] = [
        [{ name: 'bad', data: { big: 10n } }, 'items[3].data.big', 'NOT_JSON'],
        [{ name: 'bad', data: {}, opts: { jobid: 'typo' } }, 'items[3].opts.jobid', 'UNKNOWN_OPTION'],
        [{ name: 'bad', data: {}, extra: 1 }, 'items[3].extra', 'UNKNOWN_OPTION'],
        [{ name: '', data: {} }, 'items[3].name', 'EMPTY'],
        [{ name: 'bad', data: {}, opts: { attempts: 0 } }, 'items[3].opts.attempts', 'OUT_OF_RANGE'],
        [
          { name: 'bad', data: {}, opts: { deduplication: { id: 'k', ttl: 1.5 } } },
          'items[3].opts.deduplication.ttl',
          'NOT_INTEGER',
        ],
        [null, 'items[3]', 'INVALID_TYPE'],
      ]
      for (const [item, field, code] of cases) {
        const items = [...good.slice(0, 3), item, ...good.slice(3)] as Parameters<typeof queue.addBulk>[0]
        const err = await queue.addBulk(items).catch((e: unknown) => e)
        expect(err).toBeInstanceOf(ValidationError)
        expect(err).toMatchObject({ field, code })
      }
      const notArray = await queue.addBulk({} as never).catch((e: unknown) => e)
      expect(notArray).toMatchObject({ name: 'ValidationError', field: 'items', code: 'INVALID_TYPE' })
      const badTx = await queue.addBulk(good, { tx: {} as never }).catch((e: unknown) => e)
      expect(badTx).toMatchObject({ name: 'ValidationError', code: 'INVALID_TYPE' })
      expect(await countJobs('bulk-invalid')).toBe(0)
    } finally {
      await queue.close()
    }
  })

  it("EXTEND_NOT_PENDING inside a batch rolls back the whole batch; the caller's transaction stays usable", async () => {
    const queue = new Queue('bulk-extend', { connectionString: db.url, schema: db.schema })
    try {
      const owner = await queue.add('owner', { i: -1 }, { deduplication: { id: 'ext', ttl: 60_000 } })
      await db.pool.query(`update "${db.schema}".jobs set state = 'active' where id = $1`, [owner.id])
      const batch = [
        { name: 'plain', data: { i: 0 } },
        { name: 'with-id', data: { i: 1 }, opts: { jobId: 'bulk-extend-a' } },
        { name: 'with-key', data: { i: 2 }, opts: { deduplication: { id: 'aaa-first' } } },
        { name: 'extend', data: { i: 3 }, opts: { deduplication: { id: 'ext', ttl: 60_000, extend: true } } },
        { name: 'late', data: { i: 4 }, opts: { jobId: 'zzz-last' } },
      ]

      const alone = await queue.addBulk(batch).catch((e: unknown) => e)
      expect(alone).toBeInstanceOf(DeduplicationError)
      expect(alone).toMatchObject({ code: 'EXTEND_NOT_PENDING', ownerId: owner.id, key: 'ext' })
      expect(await countJobs('bulk-extend')).toBe(1)

      const client = await db.pool.connect()
      try {
        await client.query('begin')
        await queue.add('before', { i: 10 }, { tx: client })
        const inTx = await queue.addBulk(batch, { tx: client }).catch((e: unknown) => e)
        expect(inTx).toMatchObject({ name: 'DeduplicationError', code: 'EXTEND_NOT_PENDING' })
        const after = await queue.addBulk([{ name: 'after', data: { i: 11 } }], { tx: client })
        expect(after).toHaveLength(1)
        await client.query('commit')
      } finally {
        client.release()
      }
      const { rows } = await db.pool.query(
        `select name from "${db.schema}".jobs where queue = 'bulk-extend' order by id`,
      )
      expect(rows.map((r) => r.name)).toEqual(['owner', 'before', 'after'])
      const keys = await db.pool.query(
        `select key, job_id from "${db.schema}".dedup_keys where queue = 'bulk-extend' order by key`,
      )
      expect(keys.rows).toEqual([{ key: 'ext', job_id: owner.id }])
    } finally {
      await queue.close()
    }
  })

  it('repeated jobIds and keys inside one batch are answered as if added one after another', async () => {
    const queue = new Queue('bulk-repeat', { connectionString: db.url, schema: db.schema })
    try {
      const jobs = await queue.addBulk([
        { name: 'a', data: { i: 0 }, opts: { jobId: 'rep-b' } },
        { name: 'a', data: { i: 1 }, opts: { jobId: 'rep-a' } },
        { name: 'a', data: { i: 2 }, opts: { jobId: 'rep-b' } },
        { name: 'a', data: { i: 3 } },
        { name: 'a', data: { i: 4 }, opts: { jobId: 'rep-a' } },
        { name: 'a', data: { i: 5 }, opts: { deduplication: { id: 'rep-key' } } },
        { name: 'a', data: { i: 6 }, opts: { deduplication: { id: 'rep-key' } } },
        { name: 'a', data: { i: 7 }, opts: { deduplication: { id: 'rep-key2', ttl: 60_000, replace: true } } },
        { name: 'a', data: { i: 8 }, opts: { deduplication: { id: 'rep-key2', ttl: 60_000, replace: true } } },
        { name: 'a', data: { i: 9 }, opts: { deduplication: { id: 'rep-key2', ttl: 60_000, replace: true } } },
      ])
      expect(jobs.map((j) => j.outcome)).toEqual([
        'added',
        'added',
        'duplicate-job-id',
        'added',
        'duplicate-job-id',
        'added',
        'duplicate-key',
        'added',
        'replaced',
        'replaced',
      ])
      const at = (i: number) => jobs[i] as (typeof jobs)[number]
      expect(at(2)).toMatchObject({ id: at(0).id, data: { i: 0 }, deduplicated: true })
      expect(at(4)).toMatchObject({ id: at(1).id, data: { i: 1 }, deduplicated: true })
      expect(at(6)).toMatchObject({ id: at(5).id, data: { i: 5 } })
      expect(jobs.map((j) => j.data)).toEqual([0, 1, 0, 3, 1, 5, 5, 7, 8, 9].map((i) => ({ i })))
      const { rows } = await db.pool.query(
        `select (data->>'i')::int as i from "${db.schema}".jobs where queue = 'bulk-repeat' order by 1`,
      )
      // Two replaces superseded the pending jobs 7 and 8: only the last generation stays.
      expect(rows.map((r) => r.i)).toEqual([0, 1, 3, 5, 9])
      const keys = await db.pool.query(
        `select key, job_id from "${db.schema}".dedup_keys where queue = 'bulk-repeat' order by key`,
      )
      expect(keys.rows).toEqual([
        { key: 'rep-key', job_id: at(5).id },
        { key: 'rep-key2', job_id: at(9).id },
      ])
    } finally {
      await queue.close()
    }
  })

  it('concurrent batches with overlapping jobIds and keys in opposite orders do not deadlock', async () => {
    const queues = Array.from(
      { length: 8 },
      () =>
        new Queue<{ from: number }>('bulk-deadlock', {
          connectionString: db.url,
          schema: db.schema,
          poolSize: 1,
          migrate: false,
        }),
    )
    try {
      const ids = Array.from({ length: 40 }, (_, i) => `dl-${String(i).padStart(2, '0')}`)
      for (let round = 0; round < 3; round++) {
        const results = await Promise.all(
          queues.map((q, p) => {
            const order = p % 2 === 0 ? ids : [...ids].reverse()
            return q.addBulk(
              order.flatMap((id) => [
                { name: 'x', data: { from: p }, opts: { jobId: `${id}-r${round}` } },
                { name: 'x', data: { from: p }, opts: { deduplication: { id: `${id}-k${round}` } } },
              ]),
            )
          }),
        )
        for (const jobs of results) expect(jobs).toHaveLength(80)
        const { rows } = await db.pool.query(
          `select count(*)::int as jobs, count(distinct job_id)::int as ids, count(distinct dedup_key)::int as keys
           from "${db.schema}".jobs where queue = 'bulk-deadlock' and (job_id like $1 or dedup_key like $2)`,
          [`%-r${round}`, `%-k${round}`],
        )
        expect(rows[0]).toEqual({ jobs: 80, ids: 40, keys: 40 })
        // Every batch saw the same job for each jobId.
        const byId = new Map<string, string>()
        for (const jobs of results) {
          for (const j of jobs) {
            const ref = j.jobId ?? `key:${j.deduplicationId}`
            expect(byId.get(ref) ?? j.id).toBe(j.id)
            byId.set(ref, j.id)
          }
        }
      }
    } finally {
      await Promise.all(queues.map((q) => q.close()))
    }
  })
})
