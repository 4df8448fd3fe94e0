// dependsOn and the worker: a dependent leaves 'waiting-children' when its last dependency completes, even when two complete at once.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_deps')
})
afterAll(async () => {
  await db.drop()
})

describe('dependents', () => {
  it('run once every dependency completed, also in another queue, and never before', async () => {
    const parents = new Queue('parents', { connectionString: db.url, schema: db.schema, migrate: false })
    const children = new Queue('children', { connectionString: db.url, schema: db.schema, migrate: false })
    const opts = {
      connectionString: db.url,
      schema: db.schema,
      maintenanceIntervalMs: 0,
      pollIntervalMs: 60_000,
      migrate: false,
    }
    const ran: string[] = []
    let openParents!: () => void
    const parentGate = new Promise<void>((r) => (openParents = r))
    // Concurrency 2 with a shared gate: both parents complete in the same moment (one batch, or two racing statements).
    const parentWorker = new Worker(
      'parents',
      async (job) => {
        await parentGate
        ran.push(job.id)
      },
      { ...opts, concurrency: 2 },
    )
    const childWorker = new Worker(
      'children',
      async (job) => {
        ran.push(job.id)
      },
      opts,
    )
    try {
      await childWorker.run()
      const p1 = await parents.add('p', {})
      const p2 = await parents.add('p', {})
      const child = await children.add('c', {}, { dependsOn: [p1.id, p2.id] })
      expect(child.state).toBe('waiting-children')
      await waitFor(async () => (await storedJob(db, p2.id)).state === 'active', 10_000, 'both parents to run')
      expect((await storedJob(db, child.id)).state).toBe('waiting-children')
      openParents()
      // The child worker sleeps with a 60 s poll: only the promotion's NOTIFY wakes it.
      await waitForState(db, child.id, 'completed', 10_000)
      expect(ran.indexOf(child.id)).toBe(2)
    } finally {
      openParents()
      await parentWorker.close()
      await childWorker.close()
      await parents.close()
      await children.close()
    }
  })
})
