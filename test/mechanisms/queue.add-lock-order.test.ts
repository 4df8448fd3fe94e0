// A single add that replaces or extends a key, or names dependsOn parents, takes its rows in the batch's order
// (_lock_batch_rows: the pending owners and the parents by id, then the key rows): otherwise a single add and a batch
// over the same key deadlock (SQLSTATE 40P01). The single add used to lock the key row first and the owner after it,
// the batch the owner first and the key row after it; found by `npm run chaos` (an add_job() and an _add_jobs()
// deadlocked, "while locking tuple … in relation jobs").
//
// The case: a third transaction holds the owner's row; the batch queues for it first (holding nothing), then the
// single add. When the third one commits, the batch takes the owner and then the key row: the single add must not be
// holding that key row meanwhile.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../../src/index.js'
import { waitFor } from '../helpers/wait.js'
import { type TestSchema, freshSchema, namedSessionUrl } from '../helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('add_lock_order')
})
afterAll(async () => {
  await db.drop()
})

/** The application_name of the adding sessions (test files run at once on one server, each in its own schema). */
const adders = () => `lock-order ${db.schema}`

/** Until `n` of the adding sessions wait for a lock. */
async function blocked(n: number, what: string): Promise<void> {
  await waitFor(
    async () =>
      (
        await db.pool.query(
          `select count(*)::int as n from pg_stat_activity
     where cardinality(pg_blocking_pids(pid)) > 0 and application_name = $1`,
          [adders()],
        )
      ).rows[0].n >= n,
    10_000,
    what,
  )
}

describe("a single add takes its rows in the batch's order", () => {
  it("a replace beside a batch replacing the same key, both queued behind the owner's row: no deadlock", async () => {
    const opts = (replace: boolean) => ({ deduplication: { id: 'rk', ttl: 600_000, replace } })
    const single = new Queue('lo-single', {
      connectionString: namedSessionUrl(db.url, adders()),
      schema: db.schema,
      migrate: false,
      poolSize: 1,
    })
    const bulk = new Queue('lo-single', {
      connectionString: namedSessionUrl(db.url, adders()),
      schema: db.schema,
      migrate: false,
      poolSize: 1,
    })
    const holder = new pg.Client({ connectionString: db.url })
    await holder.connect()
    try {
      const owner = await single.add('n', { i: 0 }, opts(false))
      await holder.query('begin')
      await holder.query(`select 1 from "${db.schema}".jobs where id = $1 for update`, [owner.id])
      const batch = bulk.addBulk([
        { name: 'n', data: { i: 1 }, opts: opts(true) },
        { name: 'other', data: { i: 2 } },
      ])
      batch.catch(() => {})
      await blocked(1, 'the batch to queue for the owner')
      const add = single.add('n', { i: 3 }, opts(true))
      add.catch(() => {})
      await blocked(2, 'the single add to queue behind it')
      await holder.query('commit')
      const [b, s] = await Promise.all([batch, add])
      expect(b.map((j) => j.outcome)).toEqual(['replaced', 'added'])
      expect(s.outcome).toBe('replaced')
      const { rows } = await db.pool.query(
        `select k.job_id::text as id from "${db.schema}".dedup_keys k where k.queue = 'lo-single' and k.key = 'rk'`,
      )
      expect(rows).toEqual([{ id: s.id }])
    } finally {
      await holder.query('rollback').catch(() => {})
      await holder.end()
      await single.close()
      await bulk.close()
    }
  })
})
