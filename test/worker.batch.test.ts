// Batch handlers (docs/workers.md, "Batch handlers"): jobs claimed together, one outcome per job with its own attempts,
// a throw failing every job's attempt, the wait to fill a batch, per-job cancellation, and the option's checks.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type BatchOutcome,
  JobCancelledError,
  LeaseLostError,
  Queue,
  ValidationError,
  Worker,
  type WorkerOptions,
} from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_batch')
})
afterAll(async () => {
  await db.drop()
})

// Generic, so that the literal `batch` it is given stays in its type and picks the Worker's batch-handler signature.
const opts = <Extra extends Partial<WorkerOptions>>(extra: Extra) => ({
  connectionString: db.url,
  schema: db.schema,
  migrate: false,
  pollIntervalMs: 200,
  poolSize: 4,
  ...extra,
})

function queueOf<Data>(name: string): Queue<Data> {
  return new Queue<Data>(name, { connectionString: db.url, schema: db.schema, migrate: false })
}

async function countIn(queue: string, state: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from "${db.schema}".jobs where queue = $1 and state = $2`,
    [queue, state],
  )
  return rows[0]!.n
}

/** Resolves when `signal` aborts; rejects after 15 s. */
function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('never aborted')), 15_000)
    signal.addEventListener('abort', () => {
      clearTimeout(timer)
      resolve()
    })
  })
}

describe('a batch worker', () => {
  it('processes 1,000 jobs in batches of at most 100, each job with its own outcome; failed jobs are retried alone', async () => {
    const queue = queueOf<{ i: number }>('batch-1000')
    await queue.addBulk(Array.from({ length: 1_000 }, (_, i) => ({ name: 'n', data: { i }, opts: { attempts: 3 } })))
    const sizes: number[] = []
    const runs = new Map<string, number>()
    const inFlight = new Set<string>()
    let overlaps = 0
    const failedEvents: string[] = []
    // Jobs whose index ends in 0 fail their first attempt with an Error value, those ending in 5 with a rejected promise.
    const worker = new Worker<{ i: number }, { doubled: number }>(
      'batch-1000',
      async (jobs) => {
        sizes.push(jobs.length)
        for (const job of jobs) {
          if (inFlight.has(job.id)) overlaps++
          inFlight.add(job.id)
          runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
        }
        await new Promise((r) => setTimeout(r, 5))
        for (const job of jobs) inFlight.delete(job.id)
        return jobs.map((job): BatchOutcome<{ doubled: number }> | Promise<{ doubled: number }> => {
          if (job.attempts === 1 && job.data.i % 10 === 0) return new Error(`no ${job.data.i}`)
          if (job.attempts === 1 && job.data.i % 10 === 5) return Promise.reject(new Error(`later ${job.data.i}`))
          return { doubled: job.data.i * 2 }
        })
      },
      opts({ batch: { size: 100 }, concurrency: 2 }),
    )
    worker.on('failed', (job, err) => failedEvents.push(`${job.state}:${err.message}`))
    try {
      await waitFor(async () => (await countIn('batch-1000', 'completed')) === 1_000, 60_000, '1,000 completed jobs')
      expect(Math.max(...sizes)).toBe(100)
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(1_200)
      expect(overlaps).toBe(0)
      expect(failedEvents).toHaveLength(200)
      expect(failedEvents.every((e) => e.startsWith('waiting:') || e.startsWith('delayed:'))).toBe(true)
      const { rows } = await db.pool.query<{ id: string; i: number; attempts: number; result: unknown }>(
        `select id, (data->>'i')::int as i, attempts, result from "${db.schema}".jobs where queue = 'batch-1000'`,
      )
      for (const row of rows) {
        const expected = row.i % 5 === 0 ? 2 : 1
        expect({ i: row.i, attempts: row.attempts, runs: runs.get(row.id) }).toEqual({
          i: row.i,
          attempts: expected,
          runs: expected,
        })
        expect(row.result).toEqual({ doubled: row.i * 2 })
      }
    } finally {
      await worker.close()
      await queue.close()
    }
  }, 90_000)

  it('fails the attempt of every job of the batch when the handler throws', async () => {
    const queue = queueOf<{ i: number }>('batch-throw')
    const added = await queue.addBulk(
      Array.from({ length: 3 }, (_, i) => ({ name: 'n', data: { i }, opts: { attempts: 1 } })),
    )
    const worker = new Worker<{ i: number }>(
      'batch-throw',
      async () => {
        throw new Error('upstream down')
      },
      opts({ batch: { size: 10 } }),
    )
    try {
      for (const job of added) {
        const row = await waitForState(db, job.id, 'failed')
        expect(row).toMatchObject({ attempts: 1, last_error: 'upstream down' })
      }
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('fails every job of the batch when the handler returns an array of the wrong length', async () => {
    const queue = queueOf<{ i: number }>('batch-shape')
    const added = await queue.addBulk(
      Array.from({ length: 2 }, (_, i) => ({ name: 'n', data: { i }, opts: { attempts: 1 } })),
    )
    const worker = new Worker<{ i: number }, string>(
      'batch-shape',
      async () => ['only one'],
      opts({ batch: { size: 2 } }),
    )
    try {
      for (const job of added) {
        const row = await waitForState(db, job.id, 'failed')
        expect(row.last_error).toMatch(/one outcome per job \(2\); got an array of 1/)
      }
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('waits up to waitMs to fill a batch: jobs added meanwhile join it, and it runs once full', async () => {
    const queue = queueOf<{ i: number }>('batch-fill')
    const batches: number[][] = []
    const worker = new Worker<{ i: number }>(
      'batch-fill',
      async (jobs) => {
        batches.push(jobs.map((j) => j.data.i))
      },
      opts({ batch: { size: 10, waitMs: 60_000 } }),
    )
    try {
      await worker.run()
      const first = await queue.addBulk(Array.from({ length: 3 }, (_, i) => ({ name: 'n', data: { i } })))
      for (const job of first) await waitForState(db, job.id, 'active')
      expect(batches).toEqual([])
      await queue.addBulk(Array.from({ length: 7 }, (_, i) => ({ name: 'n', data: { i: i + 3 } })))
      await waitFor(async () => (await countIn('batch-fill', 'completed')) === 10, 15_000, 'the full batch to run')
      expect(batches).toEqual([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]])
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('runs a batch that did not fill after waitMs, its leases renewed meanwhile (no rescue, one attempt)', async () => {
    const queue = queueOf<{ i: number }>('batch-wait')
    let startedAt: Date | undefined
    const worker = new Worker<{ i: number }>(
      'batch-wait',
      async (jobs) => {
        startedAt = (await db.pool.query<{ now: Date }>('select clock_timestamp() as now')).rows[0]!.now
        return jobs.map(() => 'ok')
      },
      // The lease is shorter than the wait, and housekeeping would rescue an expired lease.
      opts({ batch: { size: 10, waitMs: 2_500 }, leaseMs: 800, heartbeatMs: 200, maintenanceIntervalMs: 100 }),
    )
    try {
      await worker.run()
      const added = await queue.addBulk([
        { name: 'n', data: { i: 0 } },
        { name: 'n', data: { i: 1 } },
      ])
      for (const job of added) {
        const row = await waitForState(db, job.id, 'completed')
        expect(row).toMatchObject({ attempts: 1, result: 'ok' })
        expect(startedAt!.getTime() - row.started_at!.getTime()).toBeGreaterThanOrEqual(2_400)
      }
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('gives the jobs of a batch still filling back to the queue at close, unrun and their run not counted', async () => {
    const queue = queueOf<{ i: number }>('batch-close')
    let batches = 0
    const worker = new Worker<{ i: number }>(
      'batch-close',
      async () => {
        batches++
      },
      opts({ batch: { size: 10, waitMs: 60_000 } }),
    )
    try {
      await worker.run()
      const added = await queue.addBulk([
        { name: 'n', data: { i: 0 } },
        { name: 'n', data: { i: 1 } },
      ])
      for (const job of added) await waitForState(db, job.id, 'active')
      await worker.close()
      for (const job of added)
        expect(await storedJob(db, job.id)).toMatchObject({ state: 'waiting', attempts: 0, lock_token: null })
      expect(batches).toBe(0)
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  /**
   * A batch of three whose handler waits until the middle job's own signal aborts (after `act` on it), then returns each
   * job's index; the reasons each job's signal then holds, and what the worker emitted meanwhile.
   */
  async function middleJobAborted(name: string, act: (q: Queue<{ i: number }>, jobId: string) => Promise<void>) {
    const queue = queueOf<{ i: number }>(name)
    const added = await queue.addBulk(Array.from({ length: 3 }, (_, i) => ({ name: 'n', data: { i } })))
    const reasons: unknown[] = []
    const errors: Error[] = []
    const cancelled: string[] = []
    const worker = new Worker<{ i: number }>(
      name,
      async (jobs, ctx) => {
        await untilAborted(ctx.for(jobs[1]!).signal)
        for (const job of jobs) reasons.push(ctx.for(job).signal.reason)
        return jobs.map((j) => j.data.i)
      },
      opts({ batch: { size: 3 }, heartbeatMs: 100 }),
    )
    worker.on('error', (err) => errors.push(err))
    worker.on('cancelled', (job) => cancelled.push(job.id))
    try {
      await waitForState(db, added[1]!.id, 'active')
      await act(queue, added[1]!.id)
      expect(await waitForState(db, added[0]!.id, 'completed')).toMatchObject({ result: 0 })
      expect(await waitForState(db, added[2]!.id, 'completed')).toMatchObject({ result: 2 })
      expect(reasons[0]).toBeUndefined()
      expect(reasons[2]).toBeUndefined()
      return { middle: added[1]!.id, reason: reasons[1], errors, cancelled }
    } finally {
      await worker.close()
      await queue.close()
    }
  }

  it('makes the cancellation of one job visible to that job only; the others complete', async () => {
    const { middle, reason, cancelled } = await middleJobAborted('batch-cancel', async (queue, id) => {
      expect(await queue.cancelJob(id)).toBe('cancel-requested')
      await waitForState(db, id, 'cancelled')
    })
    expect(reason).toBeInstanceOf(JobCancelledError)
    expect(cancelled).toEqual([middle])
  })

  it('makes a lost lease visible to that job only: its outcome is refused and reported, the others complete', async () => {
    let token: string | undefined
    const { middle, reason, errors } = await middleJobAborted('batch-lease', async (_queue, id) => {
      // Taken over by hand: the token this worker holds no longer matches.
      const { rows } = await db.pool.query<{ lock_token: string }>(
        `update "${db.schema}".jobs set lock_token = gen_random_uuid() where id = $1 returning lock_token`,
        [id],
      )
      token = rows[0]!.lock_token
    })
    expect(reason).toBeInstanceOf(LeaseLostError)
    await waitFor(() => errors.some((e) => e instanceof LeaseLostError), 10_000, 'the lost lease to be reported')
    expect(errors.map((e) => (e as LeaseLostError).jobId)).toEqual([middle])
    expect(await storedJob(db, middle)).toMatchObject({ state: 'active', lock_token: token })
  })
})

describe('the batch option is checked before any I/O', () => {
  // A pool that records every touch: a check made after any I/O would have read it.
  const touched: string[] = []
  const pool = new Proxy({}, { get: (_t, key) => void touched.push(String(key)) })
  const batchHandler = async () => undefined
  it.each([
    [{ size: 0 }, 'OUT_OF_RANGE', 'options.batch.size'],
    [{ size: -1 }, 'OUT_OF_RANGE', 'options.batch.size'],
    [{ size: 1.5 }, 'NOT_INTEGER', 'options.batch.size'],
    [{ size: 10_001 }, 'OUT_OF_RANGE', 'options.batch.size'],
    [{}, 'REQUIRED', 'options.batch.size'],
    [{ size: '10' }, 'INVALID_TYPE', 'options.batch.size'],
    [{ size: 10, waitMs: -1 }, 'OUT_OF_RANGE', 'options.batch.waitMs'],
    [{ size: 10, waitMs: Number.NaN }, 'NOT_INTEGER', 'options.batch.waitMs'],
    [{ size: 10, wait: 5 }, 'UNKNOWN_OPTION', 'options.batch.wait'],
    [5, 'INVALID_TYPE', 'options.batch'],
    [null, 'INVALID_TYPE', 'options.batch'],
  ])('rejects batch %o with %s on %s', (batch, code, field) => {
    const make = () => new Worker('q', batchHandler, { pool, batch } as never)
    expect(make).toThrow(ValidationError)
    expect(make).toThrow(expect.objectContaining({ code, field }))
    expect(touched).toEqual([])
  })

  it('rejects a handler that is not a function, and batchSize beside batch', () => {
    expect(() => new Worker('q', 'nope' as never, { pool, batch: { size: 5 } } as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_TYPE', field: 'handler' }),
    )
    expect(() => new Worker('q', batchHandler, { pool, batch: { size: 5 }, batchSize: 5 } as never)).toThrow(
      expect.objectContaining({ code: 'CONFLICTING_OPTIONS', field: 'options.batchSize' }),
    )
    expect(touched).toEqual([])
  })

  it('tells a handler asking ctx.for about a job outside its batch', async () => {
    const queue = queueOf<{ i: number }>('batch-for')
    const [job] = await queue.addBulk([{ name: 'n', data: { i: 0 }, opts: { attempts: 1 } }])
    const worker = new Worker<{ i: number }>(
      'batch-for',
      async (_jobs, ctx) => {
        ctx.for({ id: '0' } as never)
      },
      opts({ batch: { size: 2 } }),
    )
    try {
      const row = await waitForState(db, job!.id, 'failed')
      expect(row.last_error).toMatch(/not one of this batch/)
      expect((await storedJob(db, job!.id)).attempts).toBe(1)
    } finally {
      await worker.close()
      await queue.close()
    }
  })
})
