// defineQueue at run time: its Queue and Worker are the plain classes on its name, a handler per job name runs the job
// of that name, a job of a name without a handler fails saying so, and bad definitions are refused before any I/O.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, ValidationError, Worker, defineQueue } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('define_queue')
})
afterAll(async () => {
  await db.drop()
})

const notifications = defineQueue<
  { push: { userId: number; text: string }; digest: { userId: number } },
  { push: { sent: boolean }; digest: number }
>('typed_notifications')

describe('defineQueue', () => {
  it('runs each job with the handler of its name; a name without one fails its job, saying so', async () => {
    const options = { connectionString: db.url, schema: db.schema, migrate: false }
    const queue = notifications.queue({ ...options, waitPollIntervalMs: 100 })
    const worker = notifications.worker(
      {
        push: async (job) => ({ sent: job.data.text === 'hi' }),
        digest: async (job) => job.data.userId * 10,
      },
      { ...options, pollIntervalMs: 100 },
    )
    const untyped = new Queue<unknown>('typed_notifications', options)
    try {
      expect(queue).toBeInstanceOf(Queue)
      expect(worker).toBeInstanceOf(Worker)
      expect(queue.name).toBe('typed_notifications')
      const push = await queue.add('push', { userId: 1, text: 'hi' })
      const digest = await queue.add('digest', { userId: 4 })
      const stray = await untyped.add('sms', { to: 'x' }, { attempts: 1 })
      const [p, d, s] = await Promise.all(
        [push, digest, stray].map((j) => queue.waitForJob(j.id, { timeoutMs: 20_000 })),
      )
      expect([p!.state, p!.result]).toEqual(['completed', { sent: true }])
      expect([d!.state, d!.result]).toEqual(['completed', 40])
      expect(s!.state).toBe('failed')
      expect(s!.failedReason).toBe("pgonce: queue typed_notifications has no handler for job name 'sms'")
    } finally {
      await worker.close()
      await queue.close()
      await untyped.close()
    }
  })

  it('runs a batch worker of the definition: each job of the batch gets its own outcome', async () => {
    const options = { connectionString: db.url, schema: db.schema, migrate: false }
    const batched = defineQueue<{ push: { userId: number; text: string } }, { push: number }>('typed_batches')
    const queue = batched.queue({ ...options, waitPollIntervalMs: 100 })
    const worker = batched.batchWorker(async (jobs) => jobs.map((job) => job.data.userId + 1), {
      ...options,
      pollIntervalMs: 100,
      batch: { size: 10, waitMs: 50 },
    })
    try {
      const jobs = await queue.addBulk([1, 2, 3].map((userId) => ({ name: 'push', data: { userId, text: '' } })))
      const ended = await Promise.all(jobs.map((j) => queue.waitForJob(j.id, { timeoutMs: 20_000 })))
      expect(ended.map((j) => [j.state, j.result])).toEqual([
        ['completed', 2],
        ['completed', 3],
        ['completed', 4],
      ])
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('refuses a bad queue name and a handler that is not a function, before any I/O', () => {
    expect(() => defineQueue('no spaces')).toThrow(ValidationError)
    const options = { connectionString: 'postgres://postgres@127.0.0.1:1/none', autorun: false }
    const bad = [
      [{ push: 'nope' }, 'handler.push'],
      [null, 'handler'],
      [[], 'handler'],
    ] as const
    for (const [handler, field] of bad) {
      let err: unknown
      try {
        notifications.worker(handler as never, options)
      } catch (e) {
        err = e
      }
      expect(err, field).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).field).toBe(field)
    }
  })
})
