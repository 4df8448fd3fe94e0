// addBulk against a worker's statements (docs/architecture.md, "No deadlock"): a worker's multi-row statements lock
// job rows in ascending id order, then (through the jobs_finished trigger of the jobs they finish) the dedup_keys
// rows of those jobs in the same order. A batch that locks dependsOn parents or moves keys must take its rows in that
// order too; taking them item by item in input order deadlocked against a heartbeat or a completion step over the same
// jobs (SQLSTATE 40P01, with the batch or the worker's statement as the victim).
//
// Each case plays the worker's side in a transaction of its own, one row at a time in the worker's order: it takes
// the first row, waits until the batch is blocked behind it, then takes the second. The batch must then be waiting
// for the first row while holding nothing the worker needs: the worker's second statement returns at once.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../../src/index.js'
import { HEAD, JobStore, newTokenPrefix } from '../../src/worker/job-store.js'
import { waitUntilBlockedBehind } from '../helpers/wait.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('add_bulk_lock_order')
})
afterAll(async () => {
  await db.drop()
})

/** Two jobs of `queue`, the first with the lower id, claimed (active, under a lease) by a worker. */
async function twoJobs(queue: string, opts: (i: number) => object): Promise<{ low: string; high: string }> {
  const q = new Queue(queue, { connectionString: db.url, schema: db.schema, migrate: false })
  try {
    const low = await q.add('n', { i: 0 }, opts(0))
    const high = await q.add('n', { i: 1 }, opts(1))
    const store = new JobStore(db.pool, db.schema, queue, 'w-lock-order', 3_600_000, true)
    const rows = await store.claim(2, HEAD, newTokenPrefix())
    expect(rows.map((r) => r.id).sort()).toEqual([low.id, high.id].sort())
    return { low: low.id, high: high.id }
  } finally {
    await q.close()
  }
}

/**
 * Runs `sql` on job `first` in a transaction of its own, then `batch` beside it until the batch waits for that
 * transaction, then `sql` on job `second` in the same transaction (which must not deadlock), commits, and returns the
 * batch's answer.
 */
async function interleave<T>(sql: string, first: string, second: string, batch: () => Promise<T>): Promise<T> {
  const worker = new pg.Client({ connectionString: db.url })
  await worker.connect()
  try {
    await worker.query(`set deadlock_timeout = '200ms'`)
    await worker.query('begin')
    await worker.query(sql, [first])
    const pid = (await worker.query('select pg_backend_pid() as pid')).rows[0].pid as number
    const answer = batch()
    answer.catch(() => {})
    await waitUntilBlockedBehind(db.pool, pid, "the batch to wait for the worker's first row")
    // Without the batch's ordered locks this waits for the batch, which waits for the first row: a deadlock.
    await worker.query(sql, [second])
    await worker.query('commit')
    return await answer
  } finally {
    await worker.query('rollback').catch(() => {})
    await worker.end()
  }
}

describe("addBulk takes its rows in the worker's order", () => {
  it('dependsOn parents in descending id order beside a heartbeat over both', async () => {
    const { low, high } = await twoJobs('lo-parents', () => ({}))
    const q = new Queue('lo-parents', { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      const beat = `update "${db.schema}".jobs set locked_until = locked_until + interval '1 second' where id = $1`
      const jobs = await interleave(beat, low, high, () =>
        q.addBulk([
          { name: 'c', data: { i: 21 }, opts: { dependsOn: [high] } },
          { name: 'c', data: { i: 20 }, opts: { dependsOn: [low] } },
        ]),
      )
      expect(jobs.map((j) => [j.outcome, j.state])).toEqual([
        ['added', 'waiting-children'],
        ['added', 'waiting-children'],
      ])
    } finally {
      await q.close()
    }
  }, 30_000)

  it('replacing the no-TTL keys of two running jobs in descending order beside their completions', async () => {
    const { low, high } = await twoJobs('lo-keys', (i) => ({ deduplication: { id: `nk-${i}` } }))
    const q = new Queue('lo-keys', { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      // A completion locks the job's row, then its trigger deletes the job's no-TTL key.
      const complete = `update "${db.schema}".jobs set state = 'completed', finished_at = now(), locked_until = null where id = $1`
      const jobs = await interleave(complete, low, high, () =>
        q.addBulk([
          { name: 'n', data: { i: 31 }, opts: { deduplication: { id: 'nk-1', replace: true } } },
          { name: 'n', data: { i: 30 }, opts: { deduplication: { id: 'nk-0', replace: true } } },
        ]),
      )
      // Both owners had finished when the batch read them: their keys were released, so both items are new jobs.
      expect(jobs.map((j) => j.outcome)).toEqual(['added', 'added'])
      const keys = await db.pool.query(
        `select key, job_id from "${db.schema}".dedup_keys where queue = 'lo-keys' order by key`,
      )
      expect(keys.rows).toEqual([
        { key: 'nk-0', job_id: jobs[1]?.id },
        { key: 'nk-1', job_id: jobs[0]?.id },
      ])
    } finally {
      await q.close()
    }
  }, 30_000)
})
