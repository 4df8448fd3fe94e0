// Token fencing: a handler held past its lease cannot complete (or commit a transaction for) the re-leased job, and its ctx.signal aborts.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type Job,
  type JobContext,
  LeaseLostError,
  Queue,
  Worker,
  type WorkerOptions,
  runMaintenance,
} from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema
let queue: Queue

beforeAll(async () => {
  db = await freshSchema('worker_lease')
  await db.pool.query(`create table "${db.schema}".user_rows (job_id bigint, note text)`)
  queue = new Queue('lease', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

/**
 * Expires job `id`'s lease now and lets housekeeping rescue it, as if its worker had stalled past leaseMs.
 * The worker's own heartbeat (every 100 ms here) may extend the lease between the two statements: then again.
 */
async function expireAndRescue(id: string): Promise<void> {
  await waitFor(
    async () => {
      await db.pool.query(`update "${db.schema}".jobs set locked_until = now() - interval '1 second' where id = $1`, [
        id,
      ])
      const { rescued } = await runMaintenance({ pool: db.pool, schema: db.schema })
      return rescued === 1
    },
    10_000,
    `housekeeping to rescue job ${id}`,
  )
}

/**
 * Waits until job `id` runs again (second attempt), and returns its row: active, or already completed when the
 * second run is not held back by the test (a loaded machine can miss the short active phase between two polls).
 */
function waitForReleased(id: string, states: readonly string[] = ['active']) {
  return waitFor(
    async () => {
      const r = await storedJob(db, id)
      return states.includes(r.state) && r.attempts === 2 ? r : undefined
    },
    10_000,
    `job ${id} to be re-leased`,
  )
}

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void
  const wait = new Promise<void>((r) => (open = r))
  return { wait, open }
}

/** Two workers on one queue, both running `handler`; whichever is free re-leases the rescued job. */
function twoWorkers(handler: (job: Job, ctx: JobContext) => Promise<unknown>, extra: WorkerOptions) {
  const errors: Error[] = []
  const workers = [0, 1].map(() => {
    const w = new Worker('lease', handler, {
      connectionString: db.url,
      schema: db.schema,
      concurrency: 1,
      batchSize: 1,
      pollIntervalMs: 100,
      maintenanceIntervalMs: 0,
      migrate: false,
      ...extra,
    })
    w.on('error', (err) => errors.push(err))
    return w
  })
  return { errors, close: () => Promise.all(workers.map((w) => w.close())) }
}

describe('a handler past its lease', () => {
  it('sees ctx.signal abort with LeaseLostError once a heartbeat finds the job re-leased, and its return changes nothing', async () => {
    const job = await queue.add('signal', {}, { attempts: 3 })
    const fresh = gate()
    let staleReason: unknown
    let staleReturned = false
    const { errors, close } = twoWorkers(
      async (j, ctx) => {
        if (j.attempts === 1) {
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))
          staleReason = ctx.signal.reason
          staleReturned = true
          return 'stale'
        }
        await fresh.wait
        return 'fresh'
      },
      { heartbeatMs: 100 },
    )
    try {
      const first = await waitForState(db, job.id, 'active')
      expect(first.attempts).toBe(1)
      await expireAndRescue(job.id)
      const second = await waitForReleased(job.id)
      expect(second.lock_token).not.toBe(first.lock_token)

      await waitFor(() => staleReturned, 10_000, 'the stale handler to see its signal abort')
      expect(staleReason).toBeInstanceOf(LeaseLostError)
      expect((staleReason as LeaseLostError).jobId).toBe(job.id)
      // The stale run returned 'stale'; the job is still the new run's, untouched.
      await waitFor(() => errors.some((e) => e instanceof LeaseLostError), 10_000, 'the lost lease to be reported')
      expect(await storedJob(db, job.id)).toMatchObject({
        state: 'active',
        lock_token: second.lock_token,
        result: null,
      })

      fresh.open()
      const done = await waitForState(db, job.id, 'completed')
      expect(done).toMatchObject({ attempts: 2, result: 'fresh' })
    } finally {
      fresh.open()
      await close()
    }
  })

  it('cannot complete the re-leased job even before any heartbeat noticed: the completion is fenced by the lock token', async () => {
    const job = await queue.add('fence', {}, { attempts: 3 })
    const stale = gate()
    const fresh = gate()
    let staleReturned = false
    // Heartbeats far apart: only the token in the completion statement can stop the stale run.
    const { errors, close } = twoWorkers(
      async (j) => {
        if (j.attempts === 1) {
          await stale.wait
          staleReturned = true
          return 'stale'
        }
        await fresh.wait
        return 'fresh'
      },
      { leaseMs: 120_000, heartbeatMs: 60_000 },
    )
    try {
      await waitForState(db, job.id, 'active')
      await expireAndRescue(job.id)
      const second = await waitForReleased(job.id)
      stale.open()
      await waitFor(
        () => errors.some((e) => e instanceof LeaseLostError),
        10_000,
        'the fenced completion to report the lost lease',
      )
      expect(staleReturned).toBe(true)
      expect(await storedJob(db, job.id)).toMatchObject({
        state: 'active',
        lock_token: second.lock_token,
        result: null,
      })
      fresh.open()
      expect(await waitForState(db, job.id, 'completed')).toMatchObject({ attempts: 2, result: 'fresh' })
    } finally {
      stale.open()
      fresh.open()
      await close()
    }
  })

  it('cannot commit ctx.transaction for the re-leased job: its writes roll back with LeaseLostError', async () => {
    const job = await queue.add('tx', {}, { attempts: 3 })
    const stale = gate()
    let staleError: unknown
    const { close } = twoWorkers(
      async (j, ctx) => {
        if (j.attempts === 1) {
          await stale.wait
          try {
            await ctx.transaction(async (tx) => {
              await tx.query(`insert into "${db.schema}".user_rows values ($1, 'stale write')`, [j.id])
            })
          } catch (err) {
            staleError = err
            throw err
          }
          return
        }
        return ctx.transaction(async (tx) => {
          await tx.query(`insert into "${db.schema}".user_rows values ($1, 'fresh write')`, [j.id])
          return 'fresh'
        })
      },
      { leaseMs: 120_000, heartbeatMs: 60_000 },
    )
    try {
      await waitForState(db, job.id, 'active')
      await expireAndRescue(job.id)
      await waitForReleased(job.id, ['active', 'completed'])
      stale.open()
      await waitFor(() => staleError, 10_000, 'the stale transaction to fail')
      expect(staleError).toBeInstanceOf(LeaseLostError)
      expect(await waitForState(db, job.id, 'completed')).toMatchObject({ attempts: 2, result: 'fresh' })
      const { rows } = await db.pool.query<{ note: string }>(
        `select note from "${db.schema}".user_rows where job_id = $1`,
        [job.id],
      )
      expect(rows.map((r) => r.note)).toEqual(['fresh write'])
    } finally {
      stale.open()
      await close()
    }
  })
})
