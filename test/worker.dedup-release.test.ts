// Completion and final failure release the job's no-TTL dedup key in the same statement, and only if that generation still owns it.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitForState } from './helpers/jobs.js'

let db: TestSchema
let queue: Queue<{ v: string }>

beforeAll(async () => {
  db = await freshSchema('worker_dedup')
  queue = new Queue('dedup', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

async function keyOwner(key: string): Promise<string | undefined> {
  const { rows } = await db.pool.query<{ job_id: string }>(
    `select job_id from "${db.schema}".dedup_keys where queue = 'dedup' and key = $1`,
    [key],
  )
  return rows[0]?.job_id
}

/** A worker whose handler waits for `gates[data.v]` (if any), then fails when `data.v` starts with 'fail'. */
function gatedWorker(gates: Map<string, Promise<void>>) {
  return new Worker<{ v: string }>(
    'dedup',
    async (job) => {
      await gates.get(job.data.v)
      if (job.data.v.startsWith('fail')) throw new Error(job.data.v)
      return job.data.v
    },
    {
      connectionString: db.url,
      schema: db.schema,
      concurrency: 2,
      pollIntervalMs: 100,
      maintenanceIntervalMs: 0,
      migrate: false,
    },
  )
}

describe('no-TTL dedup keys and the worker', () => {
  it('completion releases the key its job owns: the next add is a new job', async () => {
    // Held until the key's owner was checked: an idle worker otherwise completes it within a few ms of the add.
    let openA!: () => void
    const worker = gatedWorker(new Map([['a', new Promise<void>((r) => (openA = r))]]))
    try {
      const a = await queue.add('k', { v: 'a' }, { deduplication: { id: 'k1' } })
      expect(await keyOwner('k1')).toBe(a.id)
      openA()
      await waitForState(db, a.id, 'completed')
      expect(await keyOwner('k1')).toBeUndefined()
      const b = await queue.add('k', { v: 'b' }, { deduplication: { id: 'k1' } })
      expect(b).toMatchObject({ outcome: 'added', deduplicated: false })
      expect(b.id).not.toBe(a.id)
      await waitForState(db, b.id, 'completed')
    } finally {
      await worker.close()
    }
  })

  it('an old generation completing or failing for good leaves alone the key a newer generation took over', async () => {
    let openA!: () => void
    let openFail!: () => void
    const gates = new Map([
      ['a', new Promise<void>((r) => (openA = r))],
      ['fail-a', new Promise<void>((r) => (openFail = r))],
    ])
    const worker = gatedWorker(gates)
    try {
      // Completion: a runs, is replaced by b (which takes the key), then a completes.
      const a = await queue.add('k', { v: 'a' }, { deduplication: { id: 'k2' } })
      await waitForState(db, a.id, 'active')
      const b = await queue.add('k', { v: 'b' }, { deduplication: { id: 'k2', replace: true }, delay: 60_000 })
      expect(b.outcome).toBe('replaced')
      expect(await keyOwner('k2')).toBe(b.id)
      openA()
      await waitForState(db, a.id, 'completed')
      expect(await keyOwner('k2')).toBe(b.id)

      // Final failure: the same, with a job that has no attempt left.
      const f = await queue.add('k', { v: 'fail-a' }, { deduplication: { id: 'k3' }, attempts: 1 })
      await waitForState(db, f.id, 'active')
      const g = await queue.add('k', { v: 'g' }, { deduplication: { id: 'k3', replace: true }, delay: 60_000 })
      expect(await keyOwner('k3')).toBe(g.id)
      openFail()
      await waitForState(db, f.id, 'failed')
      expect(await keyOwner('k3')).toBe(g.id)
      expect(await queue.getDeduplicationJobId('k3')).toBe(g.id)
    } finally {
      openA()
      openFail()
      await worker.close()
    }
  })

  it('a final failure releases the key the failed job still owns', async () => {
    const worker = gatedWorker(new Map())
    try {
      const f = await queue.add('k', { v: 'fail-b' }, { deduplication: { id: 'k4' }, attempts: 1 })
      await waitForState(db, f.id, 'failed')
      expect(await keyOwner('k4')).toBeUndefined()
    } finally {
      await worker.close()
    }
  })
})
