// Settle polls: an add that saw due work sends no NOTIFY; if its transaction commits after the worker drained the
// queue and went to sleep, the worker's claims at growing intervals after the queue ran dry find the job long before
// the poll. The series ends at the poll interval, so an idle worker does not keep polling.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { waitFor } from './fixtures/worker-helpers.js'
import { type TestSchema, freshSchema } from './support/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('settle_polls')
})
afterAll(async () => {
  await db.drop()
})

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Id of the latest sign-up for `queue`: every empty claim of a worker makes one, and identity ids only grow (they are
 * shared by all queues: compare two readings while only this queue's worker runs). */
async function signUpsMade(queue: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: string | null }>(
    `select max(id)::text as n from "${db.schema}".idle_workers where queue = $1`, [queue])
  return Number(rows[0]?.n ?? 0)
}

function workerOn(queue: string, started: Map<string, number>): Worker {
  const worker = new Worker(queue, async (job) => {
    started.set(job.name, Date.now())
  }, { connectionString: db.url, schema: db.schema, pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false, autorun: false })
  worker.on('error', () => {})
  return worker
}

describe('settle polls after the queue runs dry', () => {
  it('a job added in a transaction that saw due work, committed after the worker went to sleep, starts without waiting for the poll', async () => {
    const queue = new Queue('settle-late', { connectionString: db.url, schema: db.schema, migrate: false })
    const started = new Map<string, number>()
    const client = await db.pool.connect()
    const worker = workerOn('settle-late', started)
    try {
      await queue.add('first', {})
      await client.query('begin')
      // 'first' is due and waiting: this add wakes no one.
      const late = await queue.add('late', {}, { tx: client })
      expect(late.state).toBe('waiting')

      await worker.run()
      await waitFor(() => started.has('first'), 5_000, "'first' to run")
      // The worker claimed again (the late job is not committed yet), found nothing and went to sleep.
      await waitFor(async () => (await signUpsMade('settle-late')) > 0, 5_000, 'the worker to sign up as idle')
      await pause(150)
      expect(started.has('late')).toBe(false)

      const committed = Date.now()
      await client.query('commit')
      await waitFor(() => started.has('late'), 3_000, "the late job to start (the poll is 60 s away)")
      expect(started.get('late')! - committed).toBeLessThan(2_000)
    } finally {
      await client.query('rollback').catch(() => {})
      client.release()
      await worker.close()
      await queue.close()
    }
  })

  it('double from 25 ms: eight claims in the first 3.2 s of idleness, then none for the next 3.2 s', async () => {
    const queue = new Queue('settle-idle', { connectionString: db.url, schema: db.schema, migrate: false })
    const started = new Map<string, number>()
    const worker = workerOn('settle-idle', started)
    try {
      await worker.run()
      await queue.add('only', {})
      await waitFor(() => started.has('only'), 5_000, 'the job to run')
      const ranAt = Date.now()
      const atRun = await signUpsMade('settle-idle')
      // Empty claims after the job: the one that found the queue dry, then settle polls 25, 50, …, 1,600 ms apart
      // (at 25, 75, 175, 375, 775, 1,575 and 3,175 ms); the next one would come 3,200 ms later (6,375 ms).
      await pause(Math.max(0, ranAt + 3_800 - Date.now()))
      const afterSeries = await signUpsMade('settle-idle')
      expect(afterSeries - atRun).toBeGreaterThanOrEqual(6)
      expect(afterSeries - atRun).toBeLessThanOrEqual(10)
      await pause(Math.max(0, ranAt + 5_800 - Date.now()))
      expect(await signUpsMade('settle-idle')).toBe(afterSeries)
    } finally {
      await worker.close()
      await queue.close()
    }
  }, 15_000)
})
