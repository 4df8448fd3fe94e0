// getJob, getJobCounts and close(): what a Queue reads back, and what a closed Queue refuses.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('lookups')
})
afterAll(async () => {
  await db.drop()
})

describe('lookups', () => {
  it('getJob returns the stored row by internal id, or null', async () => {
    const queue = new Queue<{ to: string }>('get-job', { connectionString: db.url, schema: db.schema })
    try {
      const added = await queue.add('mail', { to: 'a@example.com' }, { jobId: 'get-1', priority: 2 })
      const job = await queue.getJob(added.id)
      expect(job).toMatchObject({
        id: added.id,
        jobId: 'get-1',
        name: 'mail',
        queue: 'get-job',
        data: { to: 'a@example.com' },
        state: 'waiting',
        attempts: 0,
        maxAttempts: 1,
        priority: 2,
        deduplicated: null,
        outcome: null,
      })
      expect(typeof job?.id).toBe('string')
      expect(job?.createdAt).toBeInstanceOf(Date)
      expect(await queue.getJob('9223372036854775807')).toBeNull()
      // A job of another queue is not this queue's to read (its data would be typed as this queue's).
      const other = new Queue('get-job-other', { connectionString: db.url, schema: db.schema })
      try {
        expect(await other.getJob(added.id)).toBeNull()
      } finally {
        await other.close()
      }
    } finally {
      await queue.close()
    }
  })

  it('getJobCounts counts every state of this queue only; a due delayed job counts as waiting', async () => {
    const queue = new Queue('counts', { connectionString: db.url, schema: db.schema })
    const neighbour = new Queue('counts-neighbour', { connectionString: db.url, schema: db.schema })
    try {
      const none = { waiting: 0, delayed: 0, 'waiting-children': 0, active: 0, completed: 0, failed: 0, cancelled: 0 }
      expect(await queue.getJobCounts()).toEqual(none)
      const setState = (id: string, state: string) =>
        db.pool.query(`update "${db.schema}".jobs set state = $2 where id = $1`, [id, state])
      await queue.addBulk(Array.from({ length: 3 }, () => ({ name: 'w', data: {} })))
      await queue.add('d', {}, { delay: 3_600_000 })
      await queue.add('d', {}, { delay: 3_600_000 })
      const due = await queue.add('d', {}, { delay: 3_600_000 })
      // Backdate one delayed job so that it is due by the database clock.
      await db.pool.query(`update "${db.schema}".jobs set run_at = now() - interval '1 second' where id = $1`, [due.id])
      const parent = await queue.add('p', {})
      await queue.add('c', {}, { dependsOn: [parent.id] })
      for (const state of ['active', 'completed', 'completed', 'failed', 'cancelled'] as const) {
        await setState((await queue.add('s', {})).id, state)
      }
      await neighbour.addBulk(Array.from({ length: 5 }, () => ({ name: 'n', data: {} })))

      expect(await queue.getJobCounts()).toEqual({
        waiting: 3 + 1 + 1,
        delayed: 2,
        'waiting-children': 1,
        active: 1,
        completed: 2,
        failed: 1,
        cancelled: 1,
      })
      expect(await neighbour.getJobCounts()).toEqual({ ...none, waiting: 5 })
    } finally {
      await queue.close()
      await neighbour.close()
    }
  })

  it('close() ends the pool pgonce opened; a closed Queue rejects every call with a clear error', async () => {
    const queue = new Queue('closing', { connectionString: db.url, schema: db.schema })
    const job = await queue.add('x', {}, { jobId: 'closing-1' })
    await queue.close()
    await queue.close() // idempotent
    const calls: (() => Promise<unknown>)[] = [
      () => queue.add('x', {}),
      () => queue.addBulk([{ name: 'x', data: {} }]),
      () => queue.getJob(job.id),
      () => queue.getJobByCustomId('closing-1'),
      () => queue.getJobCounts(),
      () => queue.getDeduplicationJobId('k'),
      () => queue.removeDeduplicationKey('k'),
    ]
    for (const call of calls) await expect(call()).rejects.toThrow(/closed/)
    const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where queue = 'closing'`)
    expect(rows[0].n).toBe(1)
  })

  it('close() leaves a pool passed in open', async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 2 })
    try {
      const queue = new Queue('own-pool', { pool, schema: db.schema })
      await queue.add('x', {})
      await queue.close()
      await expect(queue.getJobCounts()).rejects.toThrow(/closed/)
      expect(
        (await pool.query(`select count(*)::int as n from "${db.schema}".jobs where queue = 'own-pool'`)).rows[0].n,
      ).toBe(1)
      expect(pool.ended).toBe(false)
    } finally {
      await pool.end()
    }
  })

  it('close() right after construction, before any call, ends cleanly', async () => {
    const queue = new Queue('never-used', { connectionString: db.url, schema: db.schema })
    await queue.close()
    await expect(queue.add('x', {})).rejects.toThrow(/closed/)
  })
})
