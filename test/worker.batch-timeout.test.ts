// timeoutMs in a batch (docs/workers.md, "Batch handlers" and "Timeouts"): a job of a batch past its timeout has its
// own signal aborted with JobTimeoutError and its attempt failed (retried, then failed), the other jobs of the batch
// are not affected, and whatever the handler returns for it later is ignored; the batch's own signal aborts, and its
// slot frees, once every job of it timed out, and close() still waits for its handler and names its jobs.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type BatchOutcome, JobTimeoutError, Queue, Worker, type WorkerOptions } from '../src/index.js'
import { captureLogger } from './helpers/effects-support.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_batch_timeout')
})
afterAll(async () => {
  await db.drop()
})

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void
  const wait = new Promise<void>((r) => (open = r))
  return { wait, open }
}

const opts = <Extra extends Partial<WorkerOptions>>(extra: Extra) => ({
  connectionString: db.url,
  schema: db.schema,
  migrate: false,
  pollIntervalMs: 50,
  maintenanceIntervalMs: 0,
  poolSize: 4,
  ...extra,
})

function queueOf(name: string): Queue<{ i: number }> {
  return new Queue<{ i: number }>(name, { connectionString: db.url, schema: db.schema, migrate: false })
}

/** The reason `signal` aborts with, as soon as it does (undefined while it has not). */
function reasonOf(signal: AbortSignal): { reason: unknown } {
  const seen: { reason: unknown } = { reason: undefined }
  signal.addEventListener('abort', () => (seen.reason = signal.reason))
  return seen
}

describe('a job of a batch that runs past its timeoutMs', () => {
  it('has its own signal aborted and its attempt retried then failed; the others complete; its late outcome is ignored', async () => {
    const queue = queueOf('batch-timeout')
    const [a, b, c] = await queue.addBulk([
      { name: 'a', data: { i: 0 } },
      { name: 'b', data: { i: 1 }, opts: { timeoutMs: 300, attempts: 2, backoff: { type: 'fixed', delay: 100 } } },
      { name: 'c', data: { i: 2 } },
    ])
    const late = [gate(), gate()]
    const jobSignals: { id: string; attempt: number; seen: { reason: unknown } }[] = []
    const batchSignals: { size: number; seen: { reason: unknown } }[] = []
    const errors: Error[] = []
    const failed: { id: string; state: string; err: Error }[] = []
    const completed: string[] = []
    const worker = new Worker<{ i: number }, string>(
      'batch-timeout',
      async (jobs, ctx) => {
        batchSignals.push({ size: jobs.length, seen: reasonOf(ctx.signal) })
        return jobs.map((job): BatchOutcome<string> | Promise<BatchOutcome<string>> => {
          jobSignals.push({ id: job.id, attempt: job.attempts, seen: reasonOf(ctx.for(job).signal) })
          if (job.name !== 'b') return `ok ${job.name}`
          // Hangs, ignoring its signal; once the test lets it go, the first attempt's item resolves, the second rejects.
          const attempt = job.attempts
          return late[attempt - 1]!.wait.then(() => {
            if (attempt === 1) return 'late result'
            throw new Error('late failure')
          })
        })
      },
      opts({ batch: { size: 3 }, concurrency: 1 }),
    )
    worker.on('error', (err) => errors.push(err))
    worker.on('failed', (job, err) => failed.push({ id: job.id, state: job.state, err }))
    worker.on('completed', (job) => completed.push(job.id))
    try {
      // The first batch holds all three; b times out, is retried after its backoff; a and c complete meanwhile.
      await waitFor(() => failed.length >= 1, 10_000, 'the first attempt of b to time out')
      expect(failed[0]).toMatchObject({ id: b!.id, state: 'delayed' })
      expect(failed[0]!.err).toBeInstanceOf(JobTimeoutError)
      expect(failed[0]!.err).toMatchObject({ jobId: b!.id, timeoutMs: 300 })
      expect(await waitForState(db, a!.id, 'completed')).toMatchObject({ attempts: 1, result: 'ok a' })
      expect(await waitForState(db, c!.id, 'completed')).toMatchObject({ attempts: 1, result: 'ok c' })
      expect(batchSignals[0]!.size).toBe(3)

      // The retry forms a batch of its own, which times out too: failed for good. Every job of that batch timed out,
      // so its ctx.signal aborts and its slot frees while the handler still hangs: a job added now runs (concurrency 1).
      await waitFor(() => failed.length >= 2, 10_000, 'the second attempt of b to time out')
      expect(failed[1]).toMatchObject({ id: b!.id, state: 'failed' })
      const failedRow = await storedJob(db, b!.id)
      expect(failedRow).toMatchObject({ state: 'failed', attempts: 2, result: null })
      expect(failedRow.last_error).toMatch(/timed out after 300 ms/)
      expect(batchSignals[1]!.size).toBe(1)
      await waitFor(() => batchSignals[1]!.seen.reason !== undefined, 5_000, "the retry's batch signal to abort")
      expect(batchSignals[1]!.seen.reason).toBeInstanceOf(JobTimeoutError)
      const d = await queue.add('d', { i: 3 })
      expect(await waitForState(db, d.id, 'completed')).toMatchObject({ attempts: 1, result: 'ok d' })

      // Only b's signals aborted, with JobTimeoutError; the first batch's own signal did not (a and c did not time out).
      const aborted = jobSignals.filter((s) => s.seen.reason !== undefined)
      expect(aborted.map((s) => [s.id, s.attempt])).toEqual([
        [b!.id, 1],
        [b!.id, 2],
      ])
      for (const s of aborted) expect(s.seen.reason).toBeInstanceOf(JobTimeoutError)
      expect(batchSignals[0]!.seen.reason).toBeUndefined()

      // The hanging items settle at last (a value, then a rejection): ignored, the row unchanged, nothing emitted.
      late.forEach((g) => g.open())
      await worker.close()
      expect(await storedJob(db, b!.id)).toEqual(failedRow)
      expect(completed.sort()).toEqual([a!.id, c!.id, d.id].sort())
      expect(failed).toHaveLength(2)
      expect(errors).toEqual([])
      expect(worker.runOutcomes.snapshot()).toMatchObject({ completed: 3, retried: 1, failed: 1 })
    } finally {
      late.forEach((g) => g.open())
      await worker.close()
      await queue.close()
    }
  })

  it('is failed while the whole handler hangs on it; the others complete when it returns, its outcome for it ignored', async () => {
    const queue = queueOf('batch-timeout-hang')
    const [a, b, c] = await queue.addBulk([
      { name: 'a', data: { i: 0 } },
      { name: 'b', data: { i: 1 }, opts: { timeoutMs: 300, attempts: 1 } },
      { name: 'c', data: { i: 2 } },
    ])
    const release = gate()
    let batchSignal: AbortSignal | undefined
    let bReason: unknown
    const errors: Error[] = []
    const failed: { id: string; state: string; err: Error }[] = []
    const worker = new Worker<{ i: number }, number>(
      'batch-timeout-hang',
      async (jobs, ctx) => {
        batchSignal = ctx.signal
        const mid = jobs.find((j) => j.name === 'b')!
        // Hangs on b, ignoring its signal, then returns an outcome for every job, b's included.
        await release.wait
        bReason = ctx.for(mid).signal.reason
        return jobs.map((j) => j.data.i)
      },
      opts({ batch: { size: 3 } }),
    )
    worker.on('error', (err) => errors.push(err))
    worker.on('failed', (job, err) => failed.push({ id: job.id, state: job.state, err }))
    try {
      const failedRow = await waitForState(db, b!.id, 'failed')
      expect(failedRow).toMatchObject({ attempts: 1, result: null })
      expect(failedRow.last_error).toMatch(/timed out after 300 ms/)
      expect(failed.map((f) => [f.id, f.state])).toEqual([[b!.id, 'failed']])
      // a and c wait for the handler; the batch's signal stays: not every job of it timed out.
      expect((await storedJob(db, a!.id)).state).toBe('active')
      expect(batchSignal?.aborted).toBe(false)

      release.open()
      expect(await waitForState(db, a!.id, 'completed')).toMatchObject({ result: 0 })
      expect(await waitForState(db, c!.id, 'completed')).toMatchObject({ result: 2 })
      expect(bReason).toBeInstanceOf(JobTimeoutError)
      await worker.close()
      expect(await storedJob(db, b!.id)).toEqual(failedRow)
      expect(failed).toHaveLength(1)
      expect(errors).toEqual([])
    } finally {
      release.open()
      await worker.close()
      await queue.close()
    }
  })

  it('keeps a batch whose jobs all timed out waited for by close() up to closeTimeoutMs, named, its jobs as recorded', async () => {
    const queue = queueOf('batch-timeout-close')
    const added = await queue.addBulk([
      { name: 'x', data: { i: 0 }, opts: { timeoutMs: 200, attempts: 1 } },
      { name: 'y', data: { i: 1 }, opts: { timeoutMs: 250, attempts: 1 } },
    ])
    const never = gate()
    const { logger, entries } = captureLogger()
    const errors: Error[] = []
    const worker = new Worker<{ i: number }>('batch-timeout-close', async () => never.wait, {
      ...opts({ batch: { size: 2 } }),
      closeTimeoutMs: 300,
      logger,
    })
    worker.on('error', (err) => errors.push(err))
    try {
      const recorded = await Promise.all(added.map((j) => waitForState(db, j.id, 'failed')))
      await worker.close()
      const warning = entries.find((e) => e.msg === 'pgonce: close timed out; aborting running batches')
      const { jobs, timedOut } = warning?.obj as { jobs: string[]; timedOut: string[] }
      expect(jobs).toEqual([])
      expect(new Set(timedOut)).toEqual(new Set(added.map((j) => j.id)))
      for (const [i, job] of added.entries()) expect(await storedJob(db, job.id)).toEqual(recorded[i])
      expect(errors).toEqual([])
    } finally {
      never.open()
      await worker.close()
      await queue.close()
    }
  })
})
