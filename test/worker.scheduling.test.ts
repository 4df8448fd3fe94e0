// Scheduling: a delayed job never starts before its run_at (database clock) yet starts soon after; due jobs start by priority, then age.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { sqlFor } from '../src/db/sql-files.js'
import { recordingPool } from './helpers/recording-pool.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'
import { waitForState } from './helpers/jobs.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_sched')
})
afterAll(async () => {
  await db.drop()
})

describe('Worker scheduling', () => {
  it('does not start a delayed job before run_at, and starts it soon after without waiting for the poll', async () => {
    const queue = new Queue('delayed', { connectionString: db.url, schema: db.schema, migrate: false })
    let startedAt: Date | undefined
    const worker = new Worker(
      'delayed',
      async () => {
        const { rows } = await db.pool.query<{ now: Date }>('select clock_timestamp() as now')
        startedAt = rows[0]!.now
      },
      { connectionString: db.url, schema: db.schema, pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false },
    )
    try {
      await worker.run()
      const job = await queue.add('later', {}, { delay: 1_500 })
      expect(job.state).toBe('delayed')
      const row = await waitForState(db, job.id, 'completed', 20_000)
      expect(startedAt).toBeDefined()
      // Never early, by the database clock; and woken by its own timer, far sooner than the 60 s poll.
      expect(startedAt!.getTime()).toBeGreaterThanOrEqual(row.run_at.getTime())
      expect(startedAt!.getTime() - row.run_at.getTime()).toBeLessThan(5_000)
      expect(row.attempts).toBe(1)
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('starts due jobs by priority (lower first), then by run_at and id', async () => {
    const queue = new Queue('prio', { connectionString: db.url, schema: db.schema, migrate: false })
    const added = []
    for (const priority of [5, 0, 3, 0, 1, 5]) added.push(await queue.add('p', { priority }, { priority }))
    const order: string[] = []
    const worker = new Worker(
      'prio',
      async (job) => {
        order.push(job.id)
      },
      {
        connectionString: db.url,
        schema: db.schema,
        concurrency: 1,
        batchSize: 2,
        maintenanceIntervalMs: 0,
        migrate: false,
      },
    )
    try {
      await waitFor(() => order.length === added.length, 15_000, 'every job to run')
      const expected = [...added]
        .sort((a, b) => a.priority - b.priority || Number(a.id) - Number(b.id))
        .map((j) => j.id)
      expect(order).toEqual(expected)
      expect(order[0]).toBe(added[1]!.id)
      expect(order.at(-1)).toBe(added[5]!.id)
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('sleeps while idle: an empty queue costs one claim per poll, not a busy loop', async () => {
    let claims = 0
    const claim = sqlFor('claim-jobs', db.schema)
    const pool = recordingPool(db, 4, (text) => {
      if (text === claim) claims++
    })
    const worker = new Worker('idle', async () => {}, {
      pool,
      schema: db.schema,
      pollIntervalMs: 500,
      maintenanceIntervalMs: 0,
      migrate: false,
    })
    try {
      await worker.run()
      // A window of time on purpose: the claims are counted per poll interval.
      await new Promise((r) => setTimeout(r, 1_600))
      // The first claim, one more once the idle slot is taken, the settle polls (25, 50, 100, 200 and 400 ms after it),
      // then one per 500 ms poll: about 10, never hundreds.
      expect(claims).toBeGreaterThanOrEqual(4)
      expect(claims).toBeLessThanOrEqual(12)
    } finally {
      await worker.close()
      await pool.end()
    }
  })
})
