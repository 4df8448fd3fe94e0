// timeoutMs (docs/workers.md#timeouts): a run past its timeout has its signal aborted with JobTimeoutError and its
// attempt failed (retried, then failed), its slot freed while the handler still hangs, and nothing it does afterwards
// applies; heartbeats never extend the lease past the deadline; the job's timeout overrides the worker's.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Job, type JobContext, JobTimeoutError, Queue, Worker, type WorkerOptions } from '../src/index.js'
import { captureLogger } from './helpers/effects-support.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema
let queue: Queue

beforeAll(async () => {
  db = await freshSchema('worker_timeout')
  queue = new Queue('timeouts', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void
  const wait = new Promise<void>((r) => (open = r))
  return { wait, open }
}

function worker(handler: (job: Job, ctx: JobContext) => Promise<unknown>, extra: WorkerOptions = {}) {
  const errors: Error[] = []
  const failed: { id: string; state: string; err: Error }[] = []
  const w = new Worker('timeouts', handler, {
    connectionString: db.url,
    schema: db.schema,
    concurrency: 1,
    pollIntervalMs: 50,
    maintenanceIntervalMs: 0,
    migrate: false,
    ...extra,
  })
  w.on('error', (err) => errors.push(err))
  w.on('failed', (job, err) => failed.push({ id: job.id, state: job.state, err }))
  return { w, errors, failed }
}

/** The run's deadline and lease as stored, in ms after started_at. */
async function deadlineOf(id: string): Promise<{ timeoutMs: number | null; leaseMs: number | null }> {
  const { rows } = await db.pool.query<{ timeout_ms: number | null; lease_ms: number | null }>(
    `select (extract(epoch from timeout_at - started_at) * 1000)::float8 as timeout_ms,
       (extract(epoch from locked_until - started_at) * 1000)::float8 as lease_ms
     from "${db.schema}".jobs where id = $1`,
    [id],
  )
  return { timeoutMs: rows[0]?.timeout_ms ?? null, leaseMs: rows[0]?.lease_ms ?? null }
}

describe('a handler that runs past timeoutMs', () => {
  it('has its signal aborted, its attempt retried with its backoff and then failed, and frees its slot while it hangs', async () => {
    const hang = await queue.add('hang', {}, { timeoutMs: 400, attempts: 2, backoff: { type: 'fixed', delay: 100 } })
    expect(hang.timeoutMs).toBe(400)
    const quick = await queue.add('quick', {})
    const release = [gate(), gate()]
    const reasons: unknown[] = []
    const lateWrites: unknown[] = []
    const ended: string[] = []
    const { w, errors, failed } = worker(async (job, ctx) => {
      if (job.name === 'quick') return 'ok'
      const attempt = job.attempts
      // Ignores its signal: waits for the test, then tries to write as if nothing happened.
      await release[attempt - 1]?.wait
      reasons.push(ctx.signal.reason)
      for (const write of [
        () => ctx.transaction(async () => 'late'),
        () => ctx.effect(`late-${attempt}`, async () => {}),
        () => ctx.updateProgress(1),
      ]) {
        lateWrites.push(await write().catch((e: unknown) => e))
      }
      ended.push(`attempt ${attempt}`)
      return 'late result'
    })
    try {
      // The first attempt times out and is retried after the backoff; the quick job runs on the freed slot (concurrency 1)
      // while the first handler still hangs.
      await waitFor(() => failed.length >= 1, 10_000, 'the first attempt to time out')
      expect(failed[0]).toMatchObject({ id: hang.id, state: 'delayed' })
      expect(failed[0]?.err).toBeInstanceOf(JobTimeoutError)
      expect(failed[0]?.err).toMatchObject({ jobId: hang.id, timeoutMs: 400 })
      await waitForState(db, quick.id, 'completed')
      expect(ended).toEqual([])

      // The second (last) attempt times out too: failed for good.
      await waitFor(() => failed.length >= 2, 10_000, 'the second attempt to time out')
      expect(failed[1]).toMatchObject({ id: hang.id, state: 'failed' })
      const failedRow = await storedJob(db, hang.id)
      expect(failedRow).toMatchObject({ state: 'failed', attempts: 2, result: null })
      expect(failedRow.last_error).toMatch(/timed out after 400 ms/)

      // The handlers end at last: their writes are refused, their results ignored; the row does not change.
      release.forEach((g) => g.open())
      await waitFor(() => ended.length === 2, 10_000, 'both handlers to end')
      expect(reasons).toHaveLength(2)
      for (const r of reasons) expect(r).toBeInstanceOf(JobTimeoutError)
      expect(lateWrites).toHaveLength(6)
      for (const e of lateWrites) expect(e).toBeInstanceOf(JobTimeoutError)
      await w.close()
      expect(await storedJob(db, hang.id)).toEqual(failedRow)
      expect(w.runOutcomes.snapshot()).toMatchObject({ retried: 1, failed: 1, completed: 1 })
      expect(errors).toEqual([])
      const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".processed_effects`)
      expect(rows[0].n).toBe(0)
    } finally {
      release.forEach((g) => g.open())
      await w.close()
    }
  })

  it('is waited for by close() up to closeTimeoutMs and named in its warning, its job staying as recorded', async () => {
    const job = await queue.add('ignore', {}, { timeoutMs: 200 })
    const never = gate()
    const { logger, entries } = captureLogger()
    const { w, errors, failed } = worker(async () => never.wait, { closeTimeoutMs: 300, logger })
    try {
      await waitFor(() => failed.length === 1, 10_000, 'the run to time out')
      const recorded = await storedJob(db, job.id)
      expect(recorded.state).toBe('failed')
      await w.close()
      const warning = entries.find((e) => e.msg === 'pgonce: close timed out; aborting running handlers')
      expect(warning?.obj).toEqual({ jobs: [], timedOut: [job.id] })
      expect(await storedJob(db, job.id)).toEqual(recorded)
      expect(errors).toEqual([])
    } finally {
      never.open()
      await w.close()
    }
  })

  it('is completed normally when it returns before its timeout', async () => {
    const job = await queue.add('fast', {}, { timeoutMs: 5_000 })
    const { w, errors } = worker(async () => 'done')
    try {
      expect((await waitForState(db, job.id, 'completed')).result).toBe('done')
      expect(errors).toEqual([])
    } finally {
      await w.close()
    }
  })
})

describe('the deadline on the database clock', () => {
  it('caps the lease: heartbeats extend it, but never past started_at + timeout', async () => {
    const job = await queue.add('beat', {}, { timeoutMs: 1_500 })
    const done = gate()
    const { w } = worker(
      async (_job, ctx) => {
        await done.wait
        expect(ctx.signal.aborted).toBe(true)
      },
      { leaseMs: 500, heartbeatMs: 60 },
    )
    const seen: { timeoutMs: number | null; leaseMs: number | null }[] = []
    try {
      await waitForState(db, job.id, 'active')
      // Until a heartbeat has moved the lease up to the deadline, every lease seen ends at or before it.
      await waitFor(
        async () => {
          const d = await deadlineOf(job.id)
          if (d.leaseMs === null) return true
          seen.push(d)
          return d.leaseMs >= 1_500
        },
        10_000,
        'the lease to reach the deadline',
      )
      expect(seen[0]?.timeoutMs).toBe(1_500)
      expect(seen.some((d) => (d.leaseMs as number) > 500)).toBe(true)
      for (const d of seen) expect(d.leaseMs as number).toBeLessThanOrEqual(1_500)
      const failed = await waitForState(db, job.id, 'failed')
      expect(failed.last_error).toMatch(/timed out after 1500 ms/)
    } finally {
      done.open()
      await w.close()
    }
  })

  it("takes the job's own timeout over the worker's, and the worker's for a job without one", async () => {
    const own = await queue.add('own', {}, { timeoutMs: 5_000 })
    const dflt = await queue.add('default', {})
    const release = gate()
    const { w, failed } = worker(
      async (job) => {
        // Both run past the worker's 300 ms: only the job without a timeout of its own times out.
        await release.wait
        return job.name
      },
      { timeoutMs: 300, concurrency: 2 },
    )
    try {
      await waitFor(() => failed.length === 1, 10_000, 'the job without its own timeout to time out')
      expect(failed[0]).toMatchObject({ id: dflt.id, state: 'failed' })
      expect(failed[0]?.err).toMatchObject({ timeoutMs: 300 })
      expect(await deadlineOf(dflt.id)).toMatchObject({ timeoutMs: 300 })
      expect(await deadlineOf(own.id)).toMatchObject({ timeoutMs: 5_000 })
      expect((await storedJob(db, own.id)).state).toBe('active')
      release.open()
      expect((await waitForState(db, own.id, 'completed')).result).toBe('own')
      expect((await storedJob(db, dflt.id)).state).toBe('failed')
    } finally {
      release.open()
      await w.close()
    }
  })
})
