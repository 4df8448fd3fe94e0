// When an add wakes workers: it NOTIFYs only while an idle worker holds one of its queue's idle slots (_wake), so that
// busy queues (and queues nobody consumes) do not pay NOTIFY's serialised commits; it reads no table to decide.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../../src/index.js'
import { sqlFor } from '../../src/db/sql-files.js'
import { listen } from '../helpers/add-probes.js'
import { waitFor } from '../helpers/wait.js'
import { waitForIdleSlot } from '../helpers/idle-slots.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('queue_wake_up')
})
afterAll(async () => {
  await db.drop()
})

const queueOf = (name: string) => new Queue(name, { connectionString: db.url, schema: db.schema, migrate: false })

/** A session holding idle slot 0 of `queue`, as a sleeping worker's LISTEN connection does. */
async function holdIdleSlot(queue: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: db.url })
  await client.connect()
  const { rows } = await client.query(sqlFor('take-idle-slot', db.schema), [queue])
  expect(rows).toEqual([{ slot: 0 }])
  return client
}

describe('waking workers', () => {
  it('NOTIFYs only while an idle slot of the queue is held: not before, not for another queue, not after it is given back', async () => {
    const queue = queueOf('wake')
    const heard = await listen(db)
    try {
      await queue.add('nobody-idle', {})
      await queue.addBulk([{ name: 'bulk', data: {} }])
      await heard.mark('m1')
      expect(heard.payloads).toEqual(['m1'])

      const slot = await holdIdleSlot('wake')
      try {
        await queue.add('single', {})
        await queue.add('delayed', {}, { delay: 60_000 })
        await queue.addBulk([
          { name: 'plain', data: {} },
          { name: 'plain', data: {} },
        ])
        await queue.addBulk([{ name: 'keyed', data: {}, opts: { jobId: 'wake-1' } }])
        await queueOf('wake-other').add('elsewhere', {})
        await heard.mark('m2')
        expect(heard.payloads).toEqual(['m1', 'wake', 'wake', 'wake', 'wake', 'm2'])
        // A duplicate queues nothing: it wakes no one.
        await queue.add('again', {}, { jobId: 'wake-1' })
        await heard.mark('m3')
        expect(heard.payloads.slice(-1)).toEqual(['m3'])
        await slot.query(sqlFor('release-idle-slot', db.schema), ['wake', 0])
        await queue.add('after', {})
        await heard.mark('m4')
        expect(heard.payloads.slice(-1)).toEqual(['m4'])
      } finally {
        await slot.end()
      }
    } finally {
      await heard.end()
      await queue.close()
    }
  })

  it('inside a transaction that rolls back: no job and no NOTIFY', async () => {
    const queue = queueOf('wake-tx')
    const heard = await listen(db)
    const slot = await holdIdleSlot('wake-tx')
    const client = await db.pool.connect()
    try {
      await client.query('begin')
      await queue.add('inside', {}, { tx: client })
      await client.query('rollback')
      await heard.mark('m1')
      expect(heard.payloads).toEqual(['m1'])
      const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where queue = 'wake-tx'`)
      expect(rows[0].n).toBe(0)
    } finally {
      client.release()
      await slot.end()
      await heard.end()
      await queue.close()
    }
  })

  it('a sleeping Worker holds a slot and starts an added job well before its poll; a worker busy with full claims gives its slot back', async () => {
    const queue = queueOf('wake-worker')
    const started: string[] = []
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const worker = new Worker(
      'wake-worker',
      async (job) => {
        started.push(job.name)
        if (job.name === 'block') await gate
      },
      {
        connectionString: db.url,
        schema: db.schema,
        concurrency: 1,
        batchSize: 1,
        pollIntervalMs: 60_000,
        maintenanceIntervalMs: 0,
        migrate: false,
      },
    )
    worker.on('error', () => {})
    const heard = await listen(db)
    try {
      await worker.run()
      await waitForIdleSlot(db, 'wake-worker')
      const t0 = Date.now()
      // Only a worker's claim makes a job active: the add answers 'waiting', even with a worker asleep and a slot free.
      expect((await queue.add('first', {})).state).toBe('waiting')
      await waitFor(() => started.includes('first'), 2_000, 'the job to start on NOTIFY')
      expect(Date.now() - t0).toBeLessThan(2_000)

      // A full batch (batchSize 1, then the worker holds a running job): it claims again on its own, slot given back.
      await queue.addBulk([
        { name: 'block', data: {} },
        { name: 'next', data: {} },
      ])
      await waitFor(() => started.includes('block'), 5_000, 'the blocking job to start')
      await waitForIdleSlot(db, 'wake-worker', false)
      release()
      await waitFor(() => started.includes('next'), 5_000, 'the next job')
    } finally {
      release()
      await heard.end()
      await worker.close()
      await queue.close()
    }
  })

  it('16 concurrent producers onto a busy queue: every job runs exactly once', async () => {
    const producers = Array.from(
      { length: 16 },
      () =>
        new Queue<{ p: number; i: number }>('wake-busy', {
          connectionString: db.url,
          schema: db.schema,
          poolSize: 1,
          migrate: false,
        }),
    )
    const runs = new Map<string, number>()
    const worker = new Worker<{ p: number; i: number }>(
      'wake-busy',
      async (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 3))
      },
      {
        connectionString: db.url,
        schema: db.schema,
        concurrency: 4,
        pollIntervalMs: 500,
        maintenanceIntervalMs: 0,
        migrate: false,
      },
    )
    worker.on('error', () => {})
    try {
      await worker.run()
      const added = await Promise.all(
        producers.map(async (q, p) => {
          const ids: string[] = []
          for (let i = 0; i < 40; i++) {
            ids.push((await q.add('job', { p, i })).id)
            if (i % 7 === 0) await new Promise((resolve) => setTimeout(resolve, Math.random() * 5))
          }
          return ids
        }),
      )
      const ids = added.flat()
      expect(new Set(ids).size).toBe(640)
      await waitFor(() => ids.every((id) => runs.has(id)), 20_000, 'every job to run')
      await worker.close()
      expect([...runs.values()].every((n) => n === 1)).toBe(true)
      expect(runs.size).toBe(640)
      const { rows } = await db.pool.query(
        `select state, count(*)::int as n from "${db.schema}".jobs where queue = 'wake-busy' group by state`,
      )
      expect(rows).toEqual([{ state: 'completed', n: 640 }])
    } finally {
      await worker.close()
      await Promise.all(producers.map((q) => q.close()))
    }
  }, 60_000)
})
