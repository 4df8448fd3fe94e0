// queue.promoteJob: a delayed job becomes due now and a sleeping worker takes it at once (the NOTIFY, not its poll);
// any other state, or no such job, is refused with a PromoteJobError and nothing changes; inside a `tx`, only a commit
// promotes it.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PromoteJobError, Queue, ValidationError, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitForState } from './helpers/jobs.js'
import { recordingPool } from './helpers/recording-pool.js'
import { waitFor } from './helpers/wait.js'
import { sqlFor } from '../src/db/sql-files.js'

let db: TestSchema
let queue: Queue

beforeAll(async () => {
  db = await freshSchema('promote_job')
  queue = new Queue('promote', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

async function stored(id: string): Promise<{ state: string; due: boolean }> {
  const { rows } = await db.pool.query<{ state: string; due: boolean }>(
    `select state, run_at <= now() as due from "${db.schema}".jobs where id = $1`,
    [id],
  )
  return rows[0]!
}

async function setState(id: string, state: string): Promise<void> {
  await db.pool.query(`update "${db.schema}".jobs set state = $2 where id = $1`, [id, state])
}

describe('promoteJob', () => {
  it('makes a delayed job due now, and a sleeping worker runs it at once, woken by the NOTIFY', async () => {
    const q = new Queue('promote-run', { connectionString: db.url, schema: db.schema, migrate: false })
    // When the worker claimed: a sleeping worker claims again at its settle polls, each twice as far apart as the last.
    const claims: number[] = []
    const claim = sqlFor('claim-jobs', db.schema)
    const pool = recordingPool(db, 4, (text) => {
      if (text === claim) claims.push(Date.now())
    })
    const worker = new Worker('promote-run', async () => {}, {
      pool,
      schema: db.schema,
      pollIntervalMs: 60_000,
      maintenanceIntervalMs: 0,
      migrate: false,
    })
    try {
      await worker.run()
      const job = await q.add('later', {}, { delay: 3_600_000 })
      // Promote just after a settle poll that came 1.5 s or more after the one before: the next one is 3 s or more
      // away, and the due timer an hour, so only the promote's NOTIFY can start the job sooner.
      await waitFor(
        () => claims.length >= 2 && claims.at(-1)! - claims.at(-2)! >= 1_500,
        30_000,
        'settle polls 1.5 s apart',
      )
      const promoted = await q.promoteJob(job.id)
      expect(promoted.id).toBe(job.id)
      expect(promoted.state).toBe('waiting')
      await waitForState(db, job.id, 'completed', 10_000)
      const { rows } = await db.pool.query<{ waited_ms: number; attempts: number }>(
        `select (extract(epoch from started_at - run_at) * 1000)::float8 as waited_ms, attempts
         from "${db.schema}".jobs where id = $1`,
        [job.id],
      )
      expect(rows[0]!.attempts).toBe(1)
      expect(rows[0]!.waited_ms).toBeLessThan(1_500)
    } finally {
      await worker.close()
      await q.close()
      await pool.end()
    }
  })

  it.each(['waiting', 'active', 'completed', 'failed', 'cancelled', 'waiting-children'])(
    'refuses a %s job with NOT_DELAYED, changing nothing',
    async (state) => {
      const job = await queue.add('x', {}, { delay: 3_600_000 })
      await setState(job.id, state)
      const err = await queue.promoteJob(job.id).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(PromoteJobError)
      expect(err).toMatchObject({ code: 'NOT_DELAYED', jobId: job.id, state })
      expect(await stored(job.id)).toEqual({ state, due: false })
    },
  )

  it('refuses a job that does not exist, or is in another queue, with NOT_FOUND', async () => {
    await expect(queue.promoteJob('999999')).rejects.toMatchObject({ name: 'PromoteJobError', code: 'NOT_FOUND' })
    const other = new Queue('promote-other', { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      const job = await other.add('x', {}, { delay: 3_600_000 })
      await expect(queue.promoteJob(job.id)).rejects.toMatchObject({ code: 'NOT_FOUND', state: null })
      expect(await stored(job.id)).toEqual({ state: 'delayed', due: false })
    } finally {
      await other.close()
    }
  })

  it('refuses a bad id before any I/O', async () => {
    await expect(queue.promoteJob('abc')).rejects.toBeInstanceOf(ValidationError)
    await expect(queue.promoteJob('1', { tx: 'no' } as never)).rejects.toMatchObject({ field: 'options.tx' })
  })

  it('inside a transaction: a rollback leaves the job delayed, a commit promotes it', async () => {
    const job = await queue.add('x', {}, { delay: 3_600_000 })
    for (const commit of [false, true]) {
      const tx = await db.pool.connect()
      try {
        await tx.query('begin')
        expect((await queue.promoteJob(job.id, { tx })).state).toBe('waiting')
        await tx.query(commit ? 'commit' : 'rollback')
      } finally {
        tx.release()
      }
      expect(await stored(job.id)).toEqual(commit ? { state: 'waiting', due: true } : { state: 'delayed', due: false })
    }
  })
})
