// Job control: cancelJob (pending at once, running through its worker, finished left alone), removeJob (refused for a
// running job), getJobs (pages newest first), pause/resume seen by a running worker, and progress fenced by the lease.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { JobCancelledError, LeaseLostError, Queue, RemoveJobError, Worker } from '../src/index.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('ops_job_control')
})
afterAll(async () => {
  await db.drop()
})

const queueOf = (name: string) => new Queue(name, { connectionString: db.url, schema: db.schema, migrate: false })
const opts = () => ({
  connectionString: db.url,
  schema: db.schema,
  maintenanceIntervalMs: 0,
  migrate: false,
  pollIntervalMs: 200,
})

describe('cancelJob', () => {
  it('cancels a pending job at once: its no-TTL key is released and its waiting dependents fail with a reason', async () => {
    const q = queueOf('cancel-pending')
    try {
      const job = await q.add('j', {}, { deduplication: { id: 'k' }, delay: 60_000 })
      const child = await q.add('c', {}, { dependsOn: [job.id] })
      expect(await q.cancelJob(job.id)).toBe('cancelled')
      expect(await storedJob(db, job.id)).toMatchObject({ state: 'cancelled' })
      expect((await storedJob(db, job.id)).finished_at).not.toBeNull()
      expect(await q.getDeduplicationJobId('k')).toBeNull()
      expect(await storedJob(db, child.id)).toMatchObject({
        state: 'failed',
        last_error: `dependency ${job.id} ended cancelled`,
      })
      expect(await q.cancelJob(job.id)).toBe('already-finished')
      expect((await q.getJobCounts()).cancelled).toBe(1)
      // Another queue's job is not this queue's to cancel.
      const other = queueOf('cancel-other')
      expect(await other.cancelJob(child.id)).toBe('not-found')
      await other.close()
    } finally {
      await q.close()
    }
  })

  it('cancels a running job through its worker: the handler sees the abort, and the job ends cancelled, not completed', async () => {
    const q = queueOf('cancel-active')
    let sawReason: unknown
    let started!: () => void
    const running = new Promise<void>((r) => (started = r))
    const cancelled: string[] = []
    const completed: string[] = []
    const worker = new Worker(
      'cancel-active',
      async (_job, ctx) => {
        started()
        await new Promise<void>((resolve) =>
          ctx.signal.addEventListener('abort', () => {
            sawReason = ctx.signal.reason
            resolve()
          }),
        )
        return 'finished anyway'
      },
      { ...opts(), heartbeatMs: 60_000, leaseMs: 180_000 },
    )
    worker.on('cancelled', (job) => cancelled.push(job.id))
    worker.on('completed', (job) => completed.push(job.id))
    try {
      const job = await q.add('slow', {}, { deduplication: { id: 'running-key' } })
      await running
      const t0 = Date.now()
      expect(await q.cancelJob(job.id)).toBe('cancel-requested')
      // Heartbeats are a minute apart: the NOTIFY brings the cancellation.
      await waitFor(() => sawReason !== undefined, 5_000, 'the handler to see the abort')
      expect(Date.now() - t0).toBeLessThan(5_000)
      expect(sawReason).toBeInstanceOf(JobCancelledError)
      await waitForState(db, job.id, 'cancelled')
      await waitFor(() => cancelled.includes(job.id), 5_000, "the 'cancelled' event")
      expect(completed).toEqual([])
      expect(await q.getDeduplicationJobId('running-key')).toBeNull()
    } finally {
      await worker.close()
      await q.close()
    }
  })

  it('a job queued behind a busy worker is cancelled at once and never runs', async () => {
    const q = queueOf('cancel-queued')
    const ran: string[] = []
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const worker = new Worker(
      'cancel-queued',
      async (job) => {
        ran.push(job.name)
        if (job.name === 'block') await gate
      },
      { ...opts(), concurrency: 1 },
    )
    try {
      await q.add('block', {})
      await waitFor(() => ran.includes('block'), 5_000, 'the blocking job')
      // The worker claims only what it starts: with its only slot busy, the next job stays waiting.
      const ahead = await q.add('ahead', {})
      expect((await storedJob(db, ahead.id)).state).toBe('waiting')
      expect(await q.cancelJob(ahead.id)).toBe('cancelled')
      release()
      const after = await q.add('after', {})
      await waitForState(db, after.id, 'completed')
      expect(ran).toEqual(['block', 'after'])
      expect(await storedJob(db, ahead.id)).toMatchObject({ state: 'cancelled', attempts: 0 })
    } finally {
      release()
      await worker.close()
      await q.close()
    }
  })
})

describe('removeJob', () => {
  it('deletes a pending or finished job with its key; refuses a running one with RemoveJobError', async () => {
    const q = queueOf('remove')
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const worker = new Worker('remove', async () => gate, opts())
    try {
      const running = await q.add('running', {})
      await waitForState(db, running.id, 'active')
      const err = await q.removeJob(running.id).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(RemoveJobError)
      expect(err).toMatchObject({ code: 'ACTIVE', jobId: running.id })
      expect(await storedJob(db, running.id)).toMatchObject({ state: 'active' })
      release()
      await worker.close()
      const pending = await q.add('pending', {}, { delay: 60_000, deduplication: { id: 'rm', ttl: 60_000 } })
      expect(await q.removeJob(pending.id)).toBe(true)
      expect(await q.getJob(pending.id)).toBeNull()
      expect(await q.getDeduplicationJobId('rm')).toBeNull()
      expect(await q.removeJob(pending.id)).toBe(false)
    } finally {
      release()
      await worker.close()
      await q.close()
    }
  })
})

describe('getJobs', () => {
  it('pages through a queue newest first, filtered by state', async () => {
    const q = queueOf('list')
    try {
      const jobs = await q.addBulk(Array.from({ length: 7 }, (_, i) => ({ name: 'j', data: { i } })))
      await db.pool.query(`update "${db.schema}".jobs set state = 'failed', finished_at = now() where id = any($1)`, [
        [jobs[1]!.id, jobs[4]!.id],
      ])
      const first = await q.getJobs({ limit: 3 })
      expect(first.map((j) => j.id)).toEqual([jobs[6]!.id, jobs[5]!.id, jobs[4]!.id])
      const second = await q.getJobs({ limit: 3, after: first[2]!.id })
      expect(second.map((j) => j.id)).toEqual([jobs[3]!.id, jobs[2]!.id, jobs[1]!.id])
      expect((await q.getJobs({ states: ['failed'] })).map((j) => j.id)).toEqual([jobs[4]!.id, jobs[1]!.id])
      expect(await queueOf('list-empty').getJobs()).toEqual([])
      await expect(q.getJobs({ states: ['done' as never] })).rejects.toMatchObject({
        name: 'ValidationError',
        field: 'options.states[0]',
      })
      await expect(q.getJobs({ limit: 0 })).rejects.toMatchObject({ name: 'ValidationError', field: 'options.limit' })
    } finally {
      await q.close()
    }
  })
})

describe('pause and resume', () => {
  it('a running worker stops claiming within a second and finishes what it holds; adds are still accepted and deduplicated', async () => {
    const q = queueOf('pause')
    const ran: string[] = []
    const worker = new Worker<{ n: number }>(
      'pause',
      async (job) => {
        ran.push(job.name)
      },
      { ...opts(), pollIntervalMs: 2_000 },
    )
    try {
      await q.add('before', { n: 0 })
      await waitFor(() => ran.includes('before'), 5_000, 'the first job')
      await q.pause()
      expect(await q.isPaused()).toBe(true)
      expect(await queueOf('pause').isPaused()).toBe(true)
      const a = await q.add('while-paused', { n: 1 }, { deduplication: { id: 'p', ttl: 60_000 } })
      const dup = await q.add('while-paused', { n: 2 }, { deduplication: { id: 'p', ttl: 60_000 } })
      expect(dup).toMatchObject({ id: a.id, outcome: 'duplicate-key' })
      // Lets time pass on purpose: a worker that went on claiming would have run the job by now.
      await new Promise((r) => setTimeout(r, 1_000))
      expect(ran).toEqual(['before'])
      expect(await storedJob(db, a.id)).toMatchObject({ state: 'waiting' })
      const t0 = Date.now()
      await q.resume()
      await waitFor(() => ran.includes('while-paused'), 5_000, 'the job after resume')
      // The resume woke the idle worker: no wait for its 2 s poll.
      expect(Date.now() - t0).toBeLessThan(1_500)
      expect(await q.isPaused()).toBe(false)
    } finally {
      await worker.close()
      await q.close()
    }
  })
})

describe('ctx.updateProgress', () => {
  it('stores the progress on the job; a run whose lease was taken over is refused', async () => {
    const q = queueOf('progress')
    let stale!: (value: unknown) => Promise<void>
    let reached!: () => void
    const atProgress = new Promise<void>((r) => (reached = r))
    const worker = new Worker(
      'progress',
      async (_job, ctx) => {
        await ctx.updateProgress({ step: 1, of: 2 })
        stale = ctx.updateProgress
        reached()
        await new Promise(() => {})
      },
      { ...opts(), closeTimeoutMs: 100 },
    )
    worker.on('error', () => {})
    try {
      const job = await q.add('p', {})
      await atProgress
      expect((await q.getJob(job.id))?.progress).toEqual({ step: 1, of: 2 })
      await db.pool.query(`update "${db.schema}".jobs set lock_token = gen_random_uuid() where id = $1`, [job.id])
      await expect(stale(50)).rejects.toBeInstanceOf(LeaseLostError)
      expect((await q.getJob(job.id))?.progress).toEqual({ step: 1, of: 2 })
      await expect(stale(() => 1)).rejects.toMatchObject({ name: 'ValidationError' })
    } finally {
      await worker.close()
      await q.close()
    }
  })
})
