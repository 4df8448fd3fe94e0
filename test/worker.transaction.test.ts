// ctx.transaction and ctx.effect: the handler's writes and the job's completion commit together or not at all; ctx.runOnce's duplicate-running reschedules the job.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema
let queue: Queue<{ n: number }>

beforeAll(async () => {
  db = await freshSchema('worker_tx')
  await db.pool.query(`create table "${db.schema}".user_rows (job_id bigint, note text)`)
  queue = new Queue('tx', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

function opts() {
  return { connectionString: db.url, schema: db.schema, pollIntervalMs: 100, maintenanceIntervalMs: 0, migrate: false }
}

async function userRows(jobId: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ note: string }>(
    `select note from "${db.schema}".user_rows where job_id = $1 order by note`,
    [jobId],
  )
  return rows.map((r) => r.note)
}

describe('ctx.transaction', () => {
  it('commits the handler write and the completion together', async () => {
    const job = await queue.add('ok', { n: 1 })
    // Destructured: the ctx methods do not depend on `this`.
    const worker = new Worker<{ n: number }>(
      'tx',
      async (j, { transaction }) => {
        return transaction(async (tx) => {
          await tx.query(`insert into "${db.schema}".user_rows values ($1, 'written')`, [j.id])
          // Inside the transaction the job is still active: nothing is visible outside before commit.
          const outside = await db.pool.query(`select 1 from "${db.schema}".user_rows where job_id = $1`, [j.id])
          expect(outside.rowCount).toBe(0)
          return { n: j.data.n }
        })
      },
      opts(),
    )
    try {
      const row = await waitForState(db, job.id, 'completed')
      expect(row.result).toEqual({ n: 1 })
      expect(await userRows(job.id)).toEqual(['written'])
    } finally {
      await worker.close()
    }
  })

  it('a thrown error rolls back both: no user row, no completion; the attempt is recorded as failed', async () => {
    const job = await queue.add('boom', { n: 2 }, { attempts: 1 })
    const worker = new Worker<{ n: number }>(
      'tx',
      async (j, ctx) => {
        await ctx.transaction(async (tx) => {
          await tx.query(`insert into "${db.schema}".user_rows values ($1, 'must vanish')`, [j.id])
          throw new Error('rolled back')
        })
      },
      opts(),
    )
    try {
      const row = await waitForState(db, job.id, 'failed')
      expect(row.last_error).toBe('rolled back')
      expect(row.result).toBeNull()
      expect(await userRows(job.id)).toEqual([])
    } finally {
      await worker.close()
    }
  })
})

describe('ctx.effect and ctx.runOnce', () => {
  it('ctx.effect runs the effect once: a replay of the job (retryJob) skips it and still completes', async () => {
    const job = await queue.add('effect', { n: 3 }, { attempts: 1 })
    const outcomes: string[] = []
    const worker = new Worker<{ n: number }>(
      'tx',
      async (j, ctx) => {
        outcomes.push(
          await ctx.effect(`charge:${j.data.n}`, async (tx) => {
            await tx.query(`insert into "${db.schema}".user_rows values ($1, 'charged')`, [j.id])
          }),
        )
      },
      opts(),
    )
    try {
      await waitForState(db, job.id, 'completed')
      expect(outcomes).toEqual(['ran'])
      // Replay by hand: mark it failed as an operator would find it, then retry it.
      await db.pool.query(`update "${db.schema}".jobs set state = 'failed' where id = $1`, [job.id])
      await queue.retryJob(job.id)
      await waitFor(() => outcomes.length === 2, 10_000, 'the replay to run')
      await waitForState(db, job.id, 'completed')
      expect(outcomes).toEqual(['ran', 'duplicate-done'])
      expect(await userRows(job.id)).toEqual(['charged'])
    } finally {
      await worker.close()
    }
  })

  it('ctx.runOnce finding the work running elsewhere reschedules the job without counting the attempt, never completing it', async () => {
    const effects = new Effects({ connectionString: db.url, schema: db.schema, migrate: false })
    let releaseHolder!: () => void
    const holderGate = new Promise<void>((r) => (releaseHolder = r))
    let holderStarted = false
    const holder = effects.runOnce('send:42', async () => {
      holderStarted = true
      await holderGate
    })
    await waitFor(() => holderStarted, 5_000, 'the other holder to claim the key')

    const job = await queue.add('runonce', { n: 42 }, { attempts: 1 })
    const seen: string[] = []
    const worker = new Worker<{ n: number }>(
      'tx',
      async (j, ctx) => {
        try {
          seen.push(
            await ctx.runOnce(`send:${j.data.n}`, async () => {
              seen.push('work')
            }),
          )
        } catch (err) {
          // Swallowing it must not turn the job into a success.
          seen.push((err as Error).name)
        }
      },
      { ...opts(), retryLaterMs: 300 },
    )
    try {
      await waitFor(() => seen.includes('RetryLaterError'), 10_000, 'the duplicate-running answer')
      const rescheduled = await waitForState(db, job.id, 'delayed')
      expect(rescheduled.attempts).toBe(0)
      expect(rescheduled.result).toBeNull()
      releaseHolder()
      expect(await holder).toBe('ran')
      const done = await waitForState(db, job.id, 'completed')
      expect(done.attempts).toBe(1)
      expect(seen.at(-1)).toBe('duplicate-done')
      expect(seen).not.toContain('work')
    } finally {
      await worker.close()
      await effects.close()
    }
  })
})
