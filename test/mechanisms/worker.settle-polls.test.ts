// Settle polls: an add NOTIFYs only when an idle worker holds one of the queue's idle slots (see _wake). One made before
// the worker took its slot sends no NOTIFY; if its transaction commits after the worker drained the queue and went to
// sleep, the worker's claims at growing intervals after the queue ran dry find the job long before the poll. The
// series ends at the poll interval, so an idle worker does not keep polling.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../../src/index.js'
import { sqlFor } from '../../src/db/sql-files.js'
import { recordingPool } from '../helpers/recording-pool.js'
import { waitFor } from '../helpers/wait.js'
import { waitForIdleSlot } from '../helpers/idle-slots.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('settle_polls')
})
afterAll(async () => {
  await db.drop()
})

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A worker whose claim statements are counted (`claims()`). */
function workerOn(queue: string, started: Map<string, number>) {
  let claims = 0
  const claim = sqlFor('claim-jobs', db.schema)
  const pool = recordingPool(db, 4, (text) => {
    if (text === claim) claims++
  })
  const worker = new Worker(
    queue,
    async (job) => {
      started.set(job.name, Date.now())
    },
    { pool, schema: db.schema, pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false, autorun: false },
  )
  worker.on('error', () => {})
  return {
    worker,
    claims: () => claims,
    close: async () => {
      await worker.close()
      await pool.end()
    },
  }
}

describe('settle polls after the queue runs dry', () => {
  it('a job added in a transaction that saw due work, committed after the worker went to sleep, starts without waiting for the poll', async () => {
    const queue = new Queue('settle-late', { connectionString: db.url, schema: db.schema, migrate: false })
    const started = new Map<string, number>()
    const client = await db.pool.connect()
    const { worker, claims, close } = workerOn('settle-late', started)
    try {
      await queue.add('first', {})
      await client.query('begin')
      // No worker holds an idle slot yet: this add wakes no one.
      const late = await queue.add('late', {}, { tx: client })
      expect(late.state).toBe('waiting')

      await worker.run()
      await waitFor(() => started.has('first'), 5_000, "'first' to run")
      // The worker claimed again (the late job is not committed yet), took its slot, claimed once more and slept.
      await waitFor(() => claims() >= 3, 5_000, 'the worker to find the queue dry')
      await waitForIdleSlot(db, 'settle-late')
      expect(started.has('late')).toBe(false)

      const committed = Date.now()
      await client.query('commit')
      await waitFor(() => started.has('late'), 3_000, 'the late job to start (the poll is 60 s away)')
      expect(started.get('late')! - committed).toBeLessThan(2_000)
    } finally {
      await client.query('rollback').catch(() => {})
      client.release()
      await close()
      await queue.close()
    }
  })

  it('double from 25 ms: eight claims in the first 3.2 s of idleness, then none for the next 3.2 s', async () => {
    const queue = new Queue('settle-idle', { connectionString: db.url, schema: db.schema, migrate: false })
    const started = new Map<string, number>()
    const { worker, claims, close } = workerOn('settle-idle', started)
    try {
      await worker.run()
      await queue.add('only', {})
      await waitFor(() => started.has('only'), 5_000, 'the job to run')
      const ranAt = Date.now()
      const atRun = claims()
      // Empty claims after the job: the one that found the queue dry, then settle polls 25, 50, …, 1,600 ms apart
      // (at 25, 75, 175, 375, 775, 1,575 and 3,175 ms); the next one would come 3,200 ms later (6,375 ms). Windows of
      // time on purpose: the claims are counted in each.
      await pause(Math.max(0, ranAt + 3_800 - Date.now()))
      const afterSeries = claims()
      expect(afterSeries - atRun).toBeGreaterThanOrEqual(6)
      expect(afterSeries - atRun).toBeLessThanOrEqual(10)
      await pause(Math.max(0, ranAt + 5_800 - Date.now()))
      expect(claims()).toBe(afterSeries)
    } finally {
      await close()
      await queue.close()
    }
  }, 15_000)
})
