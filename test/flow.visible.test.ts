// What shows a queue's limits: the queue_limits view (limits, slots in use, starts in the rate window) and the held_jobs
// view (for each due waiting job that a limit holds back, which one).

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitForState } from './helpers/jobs.js'

let db: TestSchema
let queue: Queue

beforeAll(async () => {
  db = await freshSchema('flow_visible')
  queue = new Queue('seen', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

const heldBy = async (id: string): Promise<string | null> => {
  const { rows } = await db.pool.query<{ held_by: string }>(
    `select held_by from "${db.schema}".held_jobs where id = $1`,
    [id],
  )
  return rows[0]?.held_by ?? null
}

describe('the views of limits', () => {
  it('queue_limits and held_jobs say which limit holds a waiting job', async () => {
    const first = await queue.add('a', {})
    const second = await queue.add('b', {})
    expect(await heldBy(second.id)).toBeNull()
    await queue.setLimits({ concurrency: 1, rateLimit: { max: 2, durationMs: 60_000 } })
    const worker = new Worker(
      'seen',
      async (_job, ctx) => {
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))
      },
      { connectionString: db.url, schema: db.schema, pollIntervalMs: 100, migrate: false },
    ).on('error', () => {})
    try {
      await waitForState(db, first.id, 'active', 15_000)
      const { rows } = await db.pool.query(`select * from "${db.schema}".queue_limits where queue = 'seen'`)
      expect(rows[0]).toMatchObject({ concurrency: 1, rate_max: 2, slots_in_use: 1, rate_used: 1 })
      expect(await heldBy(second.id)).toBe('concurrency')
      await queue.cancelJob(first.id)
      await waitForState(db, second.id, 'active', 15_000)
      const third = await queue.add('c', {})
      await queue.cancelJob(second.id)
      await waitForState(db, second.id, 'cancelled', 15_000)
      // Two starts in the last minute: the window is full, the slot is free.
      expect(await heldBy(third.id)).toBe('rateLimit')
      await db.pool.query(
        `update "${db.schema}".queue_settings set rate_paused_until = now() + interval '1 minute' where queue = 'seen'`,
      )
      expect(await heldBy(third.id)).toBe('ctx.rateLimit')
      await queue.pause()
      expect(await heldBy(third.id)).toBe('paused')
      expect(await queue.getLimits()).toEqual({
        concurrency: 1,
        rateLimit: { max: 2, durationMs: 60_000 },
        slotsInUse: 0,
        group: null,
      })
    } finally {
      await worker.close()
    }
  }, 30_000)
})
