// Retries: attempts and backoff (fixed, exponential) by the database clock, the failed set keeping error and stack, and queue.retryJob.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, RetryJobError, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { backendPid } from './helpers/clients.js'
import { waitFor, waitUntilBlockedBehind } from './helpers/wait.js'

let db: TestSchema
let queue: Queue<{ n: number }>

beforeAll(async () => {
  db = await freshSchema('worker_retry')
  queue = new Queue('retry', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

function opts() {
  return { connectionString: db.url, schema: db.schema, pollIntervalMs: 100, maintenanceIntervalMs: 0, migrate: false }
}

/** Runs job `id` on a worker whose handler always throws, until the job has failed for good. */
async function failForGood(id: string): Promise<void> {
  const worker = new Worker<{ n: number }>(
    'retry',
    async () => {
      throw new Error('fails')
    },
    opts(),
  )
  try {
    await waitForState(db, id, 'failed')
  } finally {
    await worker.close()
  }
}

describe('Worker retries', () => {
  it('retries with a fixed backoff measured on the database clock, then fails for good keeping message and stack', async () => {
    const job = await queue.add('flaky', { n: 1 }, { attempts: 3, backoff: 300 })
    const started: Date[] = []
    const failedEvents: string[] = []
    const worker = new Worker<{ n: number }>(
      'retry',
      async () => {
        const { rows } = await db.pool.query<{ now: Date }>('select clock_timestamp() as now')
        started.push(rows[0]!.now)
        throw new Error(`boom ${started.length}`)
      },
      opts(),
    )
    worker.on('failed', (j, err) => failedEvents.push(`${j.state}:${err.message}`))
    try {
      const row = await waitForState(db, job.id, 'failed', 20_000)
      expect(row.attempts).toBe(3)
      expect(row.last_error).toBe('boom 3')
      expect(row.error_stack).toContain('boom 3')
      expect(row.error_stack).toContain('worker.retry.test.ts')
      expect(row.finished_at).not.toBeNull()
      // The last run's token stays on the row (sql/outcome-recorded.sql), its lease does not.
      expect(row.locked_until).toBeNull()
      expect(started).toHaveLength(3)
      for (let i = 1; i < started.length; i++) {
        expect(started[i]!.getTime() - started[i - 1]!.getTime()).toBeGreaterThanOrEqual(300)
      }
      // The row reads 'failed' once the outcome committed; the worker emits the event after that, on its own time.
      await waitFor(() => failedEvents.length === 3, 5_000, "the third 'failed' event")
      expect(failedEvents).toEqual(['delayed:boom 1', 'delayed:boom 2', 'failed:boom 3'])
    } finally {
      await worker.close()
    }
  })

  it('exponential backoff doubles the delay per attempt: run_at = now() + delay on the database clock', async () => {
    const job = await queue.add(
      'expo',
      { n: 2 },
      { attempts: 3, backoff: { type: 'exponential', delay: 400, jitter: 0 } },
    )
    const thrownAt: number[] = []
    const runAts: number[] = []
    const worker = new Worker<{ n: number }>(
      'retry',
      async () => {
        const { rows } = await db.pool.query<{ now: Date }>('select clock_timestamp() as now')
        thrownAt.push(rows[0]!.now.getTime())
        throw new Error('again')
      },
      opts(),
    )
    worker.on('failed', (j) => {
      if (j.state === 'delayed') runAts.push(j.runAt.getTime())
    })
    try {
      await waitForState(db, job.id, 'failed', 20_000)
      expect(runAts).toHaveLength(2)
      const delays = runAts.map((at, i) => at - thrownAt[i]!)
      // 400 ms after the first failure, 800 ms after the second (plus the moment between throw and record).
      expect(delays[0]).toBeGreaterThanOrEqual(400)
      expect(delays[0]).toBeLessThan(800)
      expect(delays[1]).toBeGreaterThanOrEqual(800)
      expect(delays[1]).toBeLessThan(1600)
      expect(thrownAt[1]! - thrownAt[0]!).toBeGreaterThanOrEqual(400)
      expect(thrownAt[2]! - thrownAt[1]!).toBeGreaterThanOrEqual(800)
    } finally {
      await worker.close()
    }
  })

  it('retryJob gives a failed job a fresh run with its attempts reset', async () => {
    const job = await queue.add('once', { n: 3 }, { attempts: 1 })
    let fail = true
    const worker = new Worker<{ n: number }, string>(
      'retry',
      async () => {
        if (fail) throw new Error('first run fails')
        return 'second run ok'
      },
      opts(),
    )
    try {
      await waitForState(db, job.id, 'failed')
      // Before the retry: its wake-up can reach the worker, and the job run, before retryJob's answer reaches us.
      fail = false
      await expect(queue.retryJob(job.id).then(() => 'retried')).resolves.toBe('retried')
      const done = await waitForState(db, job.id, 'completed')
      expect(done.attempts).toBe(1)
      expect(done.result).toBe('second run ok')
      // Retrying it again: the call finds it no longer failed.
      await expect(queue.retryJob(job.id)).rejects.toMatchObject({ name: 'RetryJobError', code: 'NOT_FAILED' })
    } finally {
      await worker.close()
    }
  })

  it('retryJob re-takes a released no-TTL dedup key: a later add of the key answers with the retried job', async () => {
    const key = 'retry-key-no-ttl'
    const job = await queue.add('keyed', { n: 7 }, { deduplication: { id: key }, attempts: 1 })
    await failForGood(job.id)
    expect(await queue.getDeduplicationJobId(key)).toBeNull()
    await queue.retryJob(job.id)
    expect(await queue.getDeduplicationJobId(key)).toBe(job.id)
    const again = await queue.add('keyed', { n: 8 }, { deduplication: { id: key } })
    expect(again.id).toBe(job.id)
    expect(again.outcome).toBe('duplicate-key')
    const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where dedup_key = $1`, [
      key,
    ])
    expect(rows[0].n).toBe(1)
  })

  it('retryJob refuses with a clear error while a newer live generation of its jobId exists', async () => {
    const job = await queue.add('gen', { n: 4 }, { jobId: 'retry-gen', attempts: 1 })
    await failForGood(job.id)
    const next = await queue.add('gen', { n: 5 }, { jobId: 'retry-gen', delay: 60_000 })
    expect(next.id).not.toBe(job.id)
    const err = await queue.retryJob(job.id).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(RetryJobError)
    expect(err).toMatchObject({ code: 'JOB_ID_LIVE', jobId: job.id })
    expect((await storedJob(db, job.id)).state).toBe('failed')
    await expect(queue.retryJob('999999999')).rejects.toMatchObject({ code: 'NOT_FOUND' })
  })

  it('retryJob racing a new generation of its jobId answers JOB_ID_LIVE, never an escaped unique violation (23505)', async () => {
    const job = await queue.add('race', { n: 6 }, { jobId: 'retry-race', attempts: 1 })
    await db.pool.query(`update "${db.schema}".jobs set state = 'failed', finished_at = now() where id = $1`, [job.id])
    // A new generation, inserted but not yet committed: invisible to retryJob's check, it blocks its update on the unique index.
    const other = new pg.Client({ connectionString: db.url })
    await other.connect()
    try {
      await other.query('begin')
      await other.query(
        `select * from "${db.schema}".add_job(queue => 'retry', name => 'race', job_id => 'retry-race', delay_ms => 60000)`,
      )
      const retrying = queue.retryJob(job.id).catch((e: unknown) => e)
      await waitUntilBlockedBehind(db.pool, backendPid(other), 'retryJob to wait for the uncommitted generation')
      await other.query('commit')
      const err = await retrying
      expect(err).toBeInstanceOf(RetryJobError)
      expect(err).toMatchObject({ code: 'JOB_ID_LIVE', jobId: job.id })
      expect((await storedJob(db, job.id)).state).toBe('failed')
    } finally {
      await other.end()
    }
  })
})
