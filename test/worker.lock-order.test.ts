// A worker's heartbeats, completions and releases over the same jobs never deadlock: its multi-row statements take
// turns and lock their rows in one order (ascending job id). Before, `npm run demo` reported "deadlock detected" from a
// heartbeat against another of the worker's statements now and then.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Worker } from '../src/index.js'
import { waitFor } from './helpers/wait.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_lock_order')
})
afterAll(async () => {
  await db.drop()
})

describe("lock order of a worker's statements", () => {
  it('a worker beating every 50 ms while it runs thousands of short jobs reports no deadlock', async () => {
    // Frequent claims and completions (1-3 ms handlers) and a heartbeat every 50 ms over the jobs held.
    const n = 6_000
    await db.pool.query(
      `insert into "${db.schema}".jobs (queue, name, data) select 'beat', 'n', '{}' from generate_series(1, $1)`,
      [n],
    )
    const errors: Error[] = []
    const worker = new Worker(
      'beat',
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 1 + Math.floor(Math.random() * 3)))
      },
      {
        connectionString: db.url,
        schema: db.schema,
        concurrency: 16,
        batchSize: 500,
        leaseMs: 500,
        heartbeatMs: 50,
        pollIntervalMs: 100,
        maintenanceIntervalMs: 0,
        migrate: false,
      },
    )
    worker.on('error', (err) => errors.push(err))
    try {
      await waitFor(
        async () =>
          (
            await db.pool.query(
              `select count(*)::int as n from "${db.schema}".jobs where queue = 'beat' and state = 'completed'`,
            )
          ).rows[0].n === n,
        60_000,
        'every job to complete',
      )
      expect(errors.map((e) => e.message)).toEqual([])
    } finally {
      await worker.close()
    }
  }, 90_000)
})
