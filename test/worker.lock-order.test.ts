// A worker's multi-row statements lock their rows in one order (ascending job id), so that two of them in flight
// together wait for each other instead of deadlocking. A start step does not wait for the worker's turn (a start
// must not queue behind a completion's WAL flush), and a heartbeat sent while a job was still buffered can meet that
// job's start: before the order was fixed, `npm run demo` reported "deadlock detected" from a heartbeat against a start.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Worker } from '../src/index.js'
import { HEAD, JobStore } from '../src/worker/job-store.js'
import { waitFor } from './fixtures/worker-helpers.js'
import { type TestSchema, freshSchema } from './support/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_lock_order')
})
afterAll(async () => {
  await db.drop()
})

describe('lock order of a worker\'s statements', () => {
  it('a heartbeat and a start over the same claimed jobs, given in opposite orders, never deadlock', async () => {
    const n = 2_000
    await db.pool.query(`insert into "${db.schema}".jobs (queue, name, data) select 'order', 'n', '{}' from generate_series(1, $1)`, [n])
    const store = new JobStore(db.pool, db.schema, 'order', 'worker-order', 30_000, true)
    for (let round = 0; round < 4; round++) {
      const rows = await store.claim(n, 0, HEAD)
      expect(rows.length).toBe(n)
      const jobs = rows.map((r) => ({ id: r.id, token: r.lock_token }))
      const reversed = [...jobs].reverse()
      // Not in one turn: the start step runs beside the heartbeat, as in a worker.
      const [alive, started] = await Promise.all([
        store.heartbeat(reversed.map((j) => j.id), reversed.map((j) => j.token)),
        store.start(jobs),
      ])
      expect(alive.size).toBe(n)
      expect(started.size).toBe(n)
      await store.release(jobs.map((j) => j.id), jobs.map((j) => j.token), 0)
    }
  }, 60_000)

  it('a worker beating every 50 ms while it starts claimed-ahead jobs reports no deadlock', async () => {
    // Many buffered jobs, frequent starts (1-3 ms handlers) and a heartbeat every 50 ms: a heartbeat sent while a job
    // was buffered met that job's start, and the two deadlocked now and then (the heartbeat now holds such a job back).
    const n = 6_000
    await db.pool.query(`insert into "${db.schema}".jobs (queue, name, data) select 'beat', 'n', '{}' from generate_series(1, $1)`, [n])
    const errors: Error[] = []
    const worker = new Worker('beat', async () => {
      await new Promise((resolve) => setTimeout(resolve, 1 + Math.floor(Math.random() * 3)))
    }, { connectionString: db.url, schema: db.schema, concurrency: 16, batchSize: 500, leaseMs: 500, heartbeatMs: 50,
      pollIntervalMs: 100, maintenanceIntervalMs: 0, migrate: false })
    worker.on('error', (err) => errors.push(err))
    try {
      await waitFor(async () => (await db.pool.query(
        `select count(*)::int as n from "${db.schema}".jobs where queue = 'beat' and state = 'completed'`)).rows[0].n === n,
      60_000, 'every job to complete')
      expect(errors.map((e) => e.message)).toEqual([])
    } finally {
      await worker.close()
    }
  }, 90_000)
})
