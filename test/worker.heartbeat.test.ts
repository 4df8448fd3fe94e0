// Heartbeats: a handler running several times longer than leaseMs keeps its lease, so housekeeping never rescues it and
// it runs once. A worker cut off from the database (a proxy gone silent) aborts ctx.signal when its lease runs out by
// its own clock, before the rescue starts the job on another worker (a single-job handler, and each job of a batch).

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LeaseLostError, Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'
import { stallingProxy } from './helpers/silent-server.js'

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

  it("cut off: ctx.signal aborts with LeaseLostError at the lease's end by the worker's clock, before the rescue starts the job elsewhere", async () => {
    const queue = new Queue('cut-off', { connectionString: db.url, schema: db.schema, migrate: false })
    const LEASE_MS = 1_500
    const proxy = await stallingProxy(db.url)
    const via = new URL(db.url)
    via.host = `127.0.0.1:${proxy.port}`
    let stalledAt: number
    let abortedAt: number | null = null
    let reason: unknown
    let secondAt: number | null = null
    const common = { schema: db.schema, leaseMs: LEASE_MS, heartbeatMs: 300, migrate: false }
    // Through the proxy: a worker whose network goes silent both ways when the proxy stalls.
    const cut = new Worker(
      'cut-off',
      async (_j, ctx) => {
        await new Promise<void>((resolve) =>
          ctx.signal.addEventListener('abort', () => {
            abortedAt = performance.now()
            reason = ctx.signal.reason
            resolve()
          }),
        )
        throw ctx.signal.reason
      },
      {
        ...common,
        connectionString: via.toString(),
        maintenanceIntervalMs: 0,
        statementTimeoutMs: 2_000,
        connectTimeoutMs: 1_000,
        closeTimeoutMs: 100,
      },
    )
    cut.on('error', () => {})
    let rescuer: Worker | undefined
    try {
      await cut.run()
      const job = await queue.add('long', {}, { attempts: 3 })
      const first = await waitForState(db, job.id, 'active')
      expect(first.locked_by).toBe(cut.id)
      await waitFor(
        async () => (await storedJob(db, job.id)).locked_until!.getTime() > first.locked_until!.getTime(),
        5_000,
        'a heartbeat to extend the lease',
      )
      // Direct, rescuing expired leases every 50 ms and claiming every 50 ms: it starts the job as soon as it may.
      rescuer = new Worker(
        'cut-off',
        async () => {
          secondAt = performance.now()
          return 'second'
        },
        { ...common, connectionString: db.url, maintenanceIntervalMs: 50, pollIntervalMs: 50 },
      )
      proxy.stall()
      stalledAt = performance.now()
      const done = await waitForState(db, job.id, 'completed', LEASE_MS + 20_000)
      expect(done).toMatchObject({ attempts: 2, result: 'second', locked_by: rescuer.id })
      expect(abortedAt).not.toBeNull()
      expect(reason).toBeInstanceOf(LeaseLostError)
      // Aborted before the other worker's run started, and no later than its lease (plus a margin) after the cut.
      expect(abortedAt!).toBeLessThan(secondAt!)
      expect(abortedAt! - stalledAt).toBeLessThan(LEASE_MS + 5_000)
    } finally {
      await rescuer?.close()
      await cut.close()
      await proxy.close()
      await queue.close()
    }
  })
  it("cut off, a batch handler: each job's ctx.for(job).signal aborts with LeaseLostError at its lease's end, before the rescue starts it elsewhere", async () => {
    const queue = new Queue<{ i: number }>('cut-off-batch', {
      connectionString: db.url,
      schema: db.schema,
      migrate: false,
    })
    const LEASE_MS = 1_500
    const proxy = await stallingProxy(db.url)
    const via = new URL(db.url)
    via.host = `127.0.0.1:${proxy.port}`
    const aborted = new Map<string, { at: number; reason: unknown }>()
    const rescued = new Map<string, number>()
    const common = { schema: db.schema, leaseMs: LEASE_MS, heartbeatMs: 300, migrate: false }
    const cut = new Worker<{ i: number }>(
      'cut-off-batch',
      async (jobs, ctx) => {
        await Promise.all(
          jobs.map(
            (job) =>
              new Promise<void>((resolve) =>
                ctx.for(job).signal.addEventListener('abort', () => {
                  aborted.set(job.id, { at: performance.now(), reason: ctx.for(job).signal.reason })
                  resolve()
                }),
              ),
          ),
        )
        return jobs.map(() => 'late')
      },
      {
        ...common,
        batch: { size: 2 },
        connectionString: via.toString(),
        maintenanceIntervalMs: 0,
        statementTimeoutMs: 2_000,
        connectTimeoutMs: 1_000,
        closeTimeoutMs: 100,
      },
    )
    cut.on('error', () => {})
    let rescuer: Worker<{ i: number }> | undefined
    try {
      await cut.run()
      const added = await queue.addBulk([0, 1].map((i) => ({ name: 'long', data: { i }, opts: { attempts: 3 } })))
      for (const job of added) expect((await waitForState(db, job.id, 'active')).locked_by).toBe(cut.id)
      rescuer = new Worker<{ i: number }>(
        'cut-off-batch',
        async (job) => {
          rescued.set(job.id, performance.now())
          return 'second'
        },
        { ...common, connectionString: db.url, maintenanceIntervalMs: 50, pollIntervalMs: 50 },
      )
      proxy.stall()
      const stalledAt = performance.now()
      for (const job of added) {
        const done = await waitForState(db, job.id, 'completed', LEASE_MS + 20_000)
        expect(done).toMatchObject({ attempts: 2, result: 'second', locked_by: rescuer.id })
        const abort = aborted.get(job.id)
        expect(abort?.reason).toBeInstanceOf(LeaseLostError)
        // Aborted before the other worker's run of that job started, and within its lease (plus a margin) of the cut.
        expect(abort!.at).toBeLessThan(rescued.get(job.id)!)
        expect(abort!.at - stalledAt).toBeLessThan(LEASE_MS + 5_000)
      }
    } finally {
      await rescuer?.close()
      await cut.close()
      await proxy.close()
      await queue.close()
    }
  })
})
