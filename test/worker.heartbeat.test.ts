// Heartbeats: a handler running several times longer than leaseMs keeps its lease, so housekeeping never rescues it and it runs once.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_beat')
})
afterAll(async () => {
  await db.drop()
})

describe('heartbeats', () => {
  it('extend the lease of a long handler past leaseMs while another worker keeps rescuing expired leases', async () => {
    const queue = new Queue('beat', { connectionString: db.url, schema: db.schema, migrate: false })
    const job = await queue.add('long', {}, { attempts: 3 })
    const runs: number[] = []
    const opts = {
      connectionString: db.url,
      schema: db.schema,
      leaseMs: 1_000,
      heartbeatMs: 200,
      pollIntervalMs: 100,
      migrate: false,
    }
    const worker = new Worker(
      'beat',
      async (j) => {
        runs.push(j.attempts)
        await new Promise((r) => setTimeout(r, 3_000))
        return 'done'
      },
      { ...opts, maintenanceIntervalMs: 0 },
    )
    // Another queue's worker does housekeeping (schema-wide) every 100 ms; a rescued job would run again above.
    const rescuer = new Worker('elsewhere', async () => {}, { ...opts, maintenanceIntervalMs: 100 })
    try {
      const first = await waitForState(db, job.id, 'active')
      const extended = await waitFor(
        async () => {
          const row = await storedJob(db, job.id)
          return row.locked_until!.getTime() > first.locked_until!.getTime() ? row : undefined
        },
        5_000,
        'a heartbeat to extend the lease',
      )
      expect(extended.lock_token).toBe(first.lock_token)
      const done = await waitForState(db, job.id, 'completed', 15_000)
      expect(done).toMatchObject({ attempts: 1, result: 'done', last_error: null })
      expect(runs).toEqual([1])
    } finally {
      await worker.close()
      await rescuer.close()
      await queue.close()
    }
  })
})
