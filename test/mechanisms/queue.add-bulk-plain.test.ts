// addBulk of plain items (no jobId, key or dependency) goes through sql/add-plain-jobs.sql: one INSERT and one answer
// row; the jobs it returns must be the jobs stored.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../../src/index.js'
import { sqlFor } from '../../src/db/sql-files.js'
import { listen as listenOn, recordingQueue as recordingQueueOn } from '../helpers/add-probes.js'
import { waitFor } from '../helpers/wait.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('bulk_fast')
})
afterAll(async () => {
  await db.drop()
})

const recordingQueue = (name: string, max = 2) => recordingQueueOn(db, name, max)
const listen = () => listenOn(db)

async function storedRows(queue: string): Promise<Record<string, unknown>[]> {
  const { rows } = await db.pool.query(
    `select id::text, name, data, state, priority, max_attempts, attempts, backoff, job_id, dedup_key,
            (extract(epoch from run_at - created_at) * 1000)::float8 as delay_ms
     from "${db.schema}".jobs j where queue = $1 order by j.id`,
    [queue],
  )
  return rows
}

describe('addBulk of plain items', () => {
  it('returns the jobs as stored: ids in input order, states, run_at, priority, attempts, backoff', async () => {
    const { queue, pool, sent } = recordingQueue('fast-stored')
    try {
      const items = [
        { name: 'a', data: { i: 0, nested: { list: [1, 'two', null] } } },
        { name: 'b', data: { i: 1 }, opts: { delay: 60_000 } },
        { name: 'c', data: { i: 2 }, opts: { priority: 7, attempts: 3, backoff: 250 } },
        {
          name: 'd',
          data: { i: 3 },
          opts: { delay: 0, backoff: { type: 'exponential' as const, delay: 100, jitter: 0.25 } },
        },
        { name: 'e', data: 'a string' },
        { name: 'f', data: undefined },
        { name: 'g', data: null },
        { name: 'h', data: { i: 7 }, opts: { delay: 1, priority: 0, attempts: 1 } },
      ]
      const jobs = await queue.addBulk(items)
      expect(sent).toHaveLength(1)
      expect(sent).toEqual([sqlFor('add-plain-jobs', db.schema)])

      const stored = await storedRows('fast-stored')
      expect(jobs.map((j) => j.id)).toEqual(stored.map((r) => r.id))
      expect(stored.map((r) => r.name)).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'])
      expect(stored.map((r) => r.state)).toEqual([
        'waiting',
        'delayed',
        'waiting',
        'waiting',
        'waiting',
        'waiting',
        'waiting',
        'delayed',
      ])
      expect(stored.map((r) => r.delay_ms)).toEqual([0, 60_000, 0, 0, 0, 0, 0, 1])
      expect(stored.map((r) => [r.priority, r.max_attempts, r.attempts])).toEqual([
        [0, 1, 0],
        [0, 1, 0],
        [7, 3, 0],
        [0, 1, 0],
        [0, 1, 0],
        [0, 1, 0],
        [0, 1, 0],
        [0, 1, 0],
      ])
      expect(stored.map((r) => r.backoff)).toEqual([
        null,
        null,
        { type: 'fixed', delay: 250 },
        { type: 'exponential', delay: 100, jitter: 0.25 },
        null,
        null,
        null,
        null,
      ])
      expect(stored.map((r) => r.data)).toEqual([
        items[0]?.data,
        { i: 1 },
        { i: 2 },
        { i: 3 },
        'a string',
        {},
        null,
        { i: 7 },
      ])
      for (const r of stored) expect([r.job_id, r.dedup_key]).toEqual([null, null])

      for (const job of jobs) {
        const read = await queue.getJob(job.id)
        expect(read).not.toBeNull()
        const { outcome, deduplicated, ...fields } = job as unknown as Record<string, unknown>
        const { outcome: o2, deduplicated: d2, ...readFields } = read as unknown as Record<string, unknown>
        expect([outcome, deduplicated, o2, d2]).toEqual(['added', false, null, null])
        expect(fields).toEqual(readFields)
      }
      expect(jobs[1]!.runAt.getTime() - jobs[1]!.createdAt.getTime()).toBe(60_000)
      expect(new Set(jobs.map((j) => j.createdAt.getTime())).size).toBe(1)
      // The returned data is a copy of the caller's, not the caller's object.
      expect(jobs[0]!.data).not.toBe(items[0]!.data)
      expect(queue.outcomes.snapshot()).toEqual({ added: 8 })
    } finally {
      await queue.close()
      await pool.end()
    }
  })

  it('a batch with one jobId, key or dependency goes through add_jobs() whole', async () => {
    const { queue, pool, sent } = recordingQueue('fast-mixed')
    try {
      const parent = await queue.add('parent', {})
      sent.length = 0
      for (const opts of [{ jobId: 'fast-mixed-1' }, { deduplication: { id: 'k' } }, { dependsOn: [parent.id] }]) {
        const jobs = await queue.addBulk([
          { name: 'plain', data: {} },
          { name: 'special', data: {}, opts },
        ])
        expect(jobs.map((j) => j.outcome)).toEqual(['added', 'added'])
      }
      const addJobs = sqlFor('add-jobs', db.schema)
      expect(sent).toEqual([addJobs, addJobs, addJobs])
    } finally {
      await queue.close()
      await pool.end()
    }
  })

  it('a plain batch starts an idle worker well before its poll', async () => {
    const queue = new Queue('fast-idle', { connectionString: db.url, schema: db.schema, migrate: false })
    const started = new Set<string>()
    const worker = new Worker(
      'fast-idle',
      async (job) => {
        started.add(job.id)
      },
      { connectionString: db.url, schema: db.schema, pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false },
    )
    worker.on('error', () => {})
    try {
      await worker.run()
      const jobs = await queue.addBulk(Array.from({ length: 50 }, (_, i) => ({ name: 'job', data: { i } })))
      await waitFor(() => jobs.every((j) => started.has(j.id)), 10_000, 'the batch to start on NOTIFY')
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('inside a transaction that rolls back leaves nothing, and wakes no one', async () => {
    const queue = new Queue('fast-tx', { connectionString: db.url, schema: db.schema, migrate: false })
    const heard = await listen()
    const client = await db.pool.connect()
    try {
      await client.query('begin')
      const jobs = await queue.addBulk(
        [
          { name: 'a', data: { i: 1 } },
          { name: 'b', data: { i: 2 }, opts: { delay: 5_000 } },
        ],
        { tx: client },
      )
      expect(jobs).toHaveLength(2)
      const inside = await client.query(`select count(*)::int as n from "${db.schema}".jobs where queue = 'fast-tx'`)
      expect(inside.rows[0].n).toBe(2)
      await client.query('rollback')
      await heard.mark('after-rollback')
      expect(heard.payloads).toEqual(['after-rollback'])
      expect(await storedRows('fast-tx')).toEqual([])
      // The connection is usable and a committed batch stays.
      await client.query('begin')
      await queue.addBulk([{ name: 'c', data: {} }], { tx: client })
      await client.query('commit')
      expect((await storedRows('fast-tx')).map((r) => r.name)).toEqual(['c'])
    } finally {
      client.release()
      await heard.end()
      await queue.close()
    }
  })

  it('10,000 plain items: one statement, ids in input order, every item stored with its data', async () => {
    const { queue, pool, sent } = recordingQueue('fast-10k')
    try {
      const items = Array.from({ length: 10_000 }, (_, i) => ({
        name: `n${i % 5}`,
        data: { i, s: 'x'.repeat(i % 13) },
      }))
      const jobs = await queue.addBulk(items)
      expect(sent).toHaveLength(1)
      expect(jobs).toHaveLength(10_000)
      const { rows } = await db.pool.query(
        `select id::text, name, data from "${db.schema}".jobs j where queue = 'fast-10k' order by j.id`,
      )
      expect(rows).toHaveLength(10_000)
      rows.forEach((row, i) => {
        expect(jobs[i]!.id).toBe(row.id)
        expect(row.name).toBe(`n${i % 5}`)
        expect(row.data).toEqual(items[i]!.data)
        expect(jobs[i]!.data).toEqual(items[i]!.data)
      })
    } finally {
      await queue.close()
      await pool.end()
    }
  }, 60_000)

  it('concurrent batches from separate connections get disjoint ids, each in its own input order', async () => {
    const queues = Array.from(
      { length: 6 },
      () =>
        new Queue<{ p: number; i: number }>('fast-concurrent', {
          connectionString: db.url,
          schema: db.schema,
          poolSize: 1,
          migrate: false,
        }),
    )
    try {
      const results = await Promise.all(
        queues.map((q, p) => q.addBulk(Array.from({ length: 2_000 }, (_, i) => ({ name: 'job', data: { p, i } })))),
      )
      const all = new Set<string>()
      results.forEach((jobs, p) => {
        const ids = jobs.map((j) => BigInt(j.id))
        for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true)
        jobs.forEach((j, i) => expect(j.data).toEqual({ p, i }))
        for (const j of jobs) all.add(j.id)
      })
      expect(all.size).toBe(12_000)
      // Every returned id holds that item's data.
      const { rows } = await db.pool.query(
        `select id::text, data from "${db.schema}".jobs where queue = 'fast-concurrent'`,
      )
      const stored = new Map(rows.map((r) => [r.id as string, r.data]))
      expect(stored.size).toBe(12_000)
      results.forEach((jobs, p) => jobs.forEach((j, i) => expect(stored.get(j.id)).toEqual({ p, i })))
    } finally {
      await Promise.all(queues.map((q) => q.close()))
    }
  }, 60_000)
})
