// Graceful shutdown: close() waits for the running handler and its completion, leaves the jobs it did not start in the queue untouched, and ends its connections.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { storedJob } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'
import { sessionsNamed, sharedListenerName } from './helpers/listeners.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_close')
})
afterAll(async () => {
  await db.drop()
})

/** The LISTEN sessions of the worker's process (shared by its Workers: here, it alone). */
async function backendsOf(worker: { id: string }): Promise<number> {
  return (await sessionsNamed(db, sharedListenerName(worker.id))).length
}

describe('Worker.close()', () => {
  it('waits for the in-flight handler and records its completion; the jobs it had no slot for were never claimed', async () => {
    const queue = new Queue('close', { connectionString: db.url, schema: db.schema, migrate: false })
    const [slow, ...rest] = await queue.addBulk([0, 1, 2, 3].map((i) => ({ name: 'c', data: { i } })))
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    let finished = false
    const worker = new Worker<{ i: number }, string>(
      'close',
      async (job) => {
        if (job.id !== slow!.id) throw new Error('only the first job may start')
        await gate
        finished = true
        return 'done'
      },
      {
        connectionString: db.url,
        schema: db.schema,
        concurrency: 1,
        batchSize: 4,
        maintenanceIntervalMs: 0,
        migrate: false,
      },
    )
    await waitFor(async () => (await storedJob(db, slow!.id)).state === 'active', 10_000, 'the first job to start')
    // A worker claims only what it starts: with its only slot busy, the others stay in the queue for anyone.
    for (const j of rest)
      expect(await storedJob(db, j.id)).toMatchObject({ state: 'waiting', attempts: 0, locked_by: null })
    expect(await backendsOf(worker)).toBe(1)

    let closed = false
    const closing = worker.close().then(() => (closed = true))
    // Lets time pass on purpose: a close that did not wait for the handler would have returned by now.
    await new Promise((r) => setTimeout(r, 300))
    expect(closed).toBe(false)
    expect(finished).toBe(false)
    release()
    await closing
    expect(finished).toBe(true)

    const done = await storedJob(db, slow!.id)
    expect(done).toMatchObject({ state: 'completed', attempts: 1, result: 'done' })
    // The rest were never touched.
    for (const j of rest) {
      expect(await storedJob(db, j.id)).toMatchObject({
        state: 'waiting',
        attempts: 0,
        lock_token: null,
        locked_by: null,
        started_at: null,
      })
    }
    expect(await backendsOf(worker)).toBe(0)
    await queue.close()
  })

  it('after closeTimeoutMs aborts ctx.signal; a handler that then throws returns its job without counting the attempt', async () => {
    const queue = new Queue('close-timeout', { connectionString: db.url, schema: db.schema, migrate: false })
    const job = await queue.add('stuck', {}, { attempts: 1 })
    let sawAbort = false
    const worker = new Worker(
      'close-timeout',
      async (_job, ctx) => {
        await new Promise<void>((_, reject) =>
          ctx.signal.addEventListener('abort', () => {
            sawAbort = true
            reject(ctx.signal.reason as Error)
          }),
        )
      },
      { connectionString: db.url, schema: db.schema, closeTimeoutMs: 300, maintenanceIntervalMs: 0, migrate: false },
    )
    await waitFor(async () => (await storedJob(db, job.id)).state === 'active', 10_000, 'the job to start')
    const t0 = Date.now()
    await worker.close()
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300)
    expect(sawAbort).toBe(true)
    expect(await storedJob(db, job.id)).toMatchObject({ state: 'waiting', attempts: 0, locked_until: null })
    await queue.close()
  })

  it('returns within closeTimeoutMs + statementTimeoutMs + 3 s when a handler ignores ctx.signal inside ctx.transaction; its job waits for the rescue', async () => {
    const queue = new Queue('close-held', { connectionString: db.url, schema: db.schema, migrate: false })
    const job = await queue.add('held', {})
    const worker = new Worker(
      'close-held',
      async (_job, ctx) => {
        // Holds a connection of the worker's pool for good: the pool can never end by itself.
        await ctx.transaction(() => new Promise(() => {}))
      },
      {
        connectionString: db.url,
        schema: db.schema,
        closeTimeoutMs: 200,
        statementTimeoutMs: 500,
        maintenanceIntervalMs: 0,
        migrate: false,
      },
    )
    worker.on('error', () => {})
    await waitFor(async () => (await storedJob(db, job.id)).state === 'active', 10_000, 'the job to start')
    const t0 = Date.now()
    await worker.close()
    expect(Date.now() - t0).toBeLessThan(200 + 500 + 3_000 + 1_500)
    expect(await storedJob(db, job.id)).toMatchObject({ state: 'active', attempts: 1 })
    await queue.close()
  })
})
