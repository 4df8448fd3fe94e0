// The claim statement: the first `startNow` jobs come back active (run counted), the rest claimed ahead (pending, run
// not counted), in fetch order and from the worker's cursor. It commits without waiting for the WAL flush
// (synchronous_commit off for its own transaction only), and the setting never outlives it on a pooled connection. Its
// lock tokens (a random part per claim, the job id for the rest) must still fence: distinct jobs, distinct tokens; a
// re-claim, a new token.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../src/index.js'
import { sqlFor } from '../src/db/sql-files.js'
import { type TestSchema, freshSchema } from './support/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('claim_commit')
})
afterAll(async () => {
  await db.drop()
})

const HEAD = [-2147483648, -1e14, '0'] as const

describe('claim-jobs', () => {
  it('starts the first startNow jobs (active, run counted) and claims the rest ahead (claimed, run not counted), in fetch order', async () => {
    const queue = new Queue('split', { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      const added = await queue.addBulk([3, 1, 2, 0, 1].map((priority, i) => ({ name: 'j', data: { i }, opts: { priority } })))
      const { rows } = await db.pool.query<{ id: string; state: string; attempts: number; priority: number }>(
        sqlFor('claim-jobs', db.schema), ['split', 4, 2, 30_000, 'w', ...HEAD])
      expect(rows.map((r) => [r.priority, r.state, r.attempts])).toEqual([[0, 'active', 1], [1, 'active', 1], [1, 'claimed', 0], [2, 'claimed', 0]])
      expect(rows.map((r) => r.id)).toEqual([added[3]!.id, added[1]!.id, added[4]!.id, added[2]!.id])
      const { rows: stored } = await db.pool.query(
        `select state, attempts, started_at is not null as started from "${db.schema}".jobs where queue = 'split' order by id`)
      expect(stored.map((r) => r.state)).toEqual(['waiting', 'active', 'claimed', 'active', 'claimed'])
      expect(stored.filter((r) => r.started).length).toBe(2)
    } finally {
      await queue.close()
    }
  })

  it('seeks past its cursor: a job sorting before it waits for a claim from the head', async () => {
    const queue = new Queue('cursor', { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      const [a, b] = await queue.addBulk([{ name: 'a', data: {} }, { name: 'b', data: {} }])
      const { rows: [first] } = await db.pool.query<{ id: string; priority: number; run_at_ms: number }>(
        sqlFor('claim-jobs', db.schema), ['cursor', 1, 1, 30_000, 'w', ...HEAD])
      expect(first!.id).toBe(a!.id)
      const urgent = await queue.add('urgent', {}, { priority: 0 })
      await db.pool.query(`update "${db.schema}".jobs set priority = 5 where id = $1`, [b!.id])
      const cursor = [first!.priority, first!.run_at_ms - 0.001, first!.id]
      const { rows: fromCursor } = await db.pool.query<{ id: string }>(sqlFor('claim-jobs', db.schema), ['cursor', 10, 10, 30_000, 'w', ...cursor])
      // b (now priority 5) sorts after the cursor; urgent (priority 0, added later) too: same priority, later run_at.
      expect(fromCursor.map((r) => r.id)).toEqual([urgent.id, b!.id])
      await db.pool.query(`update "${db.schema}".jobs set state = 'waiting', priority = 0, run_at = '2000-01-01' where id = $1`, [a!.id])
      const { rows: skipped } = await db.pool.query(sqlFor('claim-jobs', db.schema), ['cursor', 10, 10, 30_000, 'w', ...cursor])
      expect(skipped).toEqual([])
      const { rows: fromHead } = await db.pool.query<{ id: string }>(sqlFor('claim-jobs', db.schema), ['cursor', 10, 10, 30_000, 'w', ...HEAD])
      expect(fromHead.map((r) => r.id)).toEqual([a!.id])
    } finally {
      await queue.close()
    }
  })

  it('is synchronous_commit off inside the claim transaction that claims, and on again after it', async () => {
    const queue = new Queue('cc', { connectionString: db.url, schema: db.schema, migrate: false })
    const client = await db.pool.connect()
    const setting = async () => (await client.query<{ synchronous_commit: string }>('show synchronous_commit')).rows[0]!.synchronous_commit
    try {
      await queue.add('a', {})
      expect(await setting()).toBe('on')
      await client.query('begin')
      try {
        const { rows } = await client.query(sqlFor('claim-jobs', db.schema), ['cc', 10, 10, 30_000, 'w', ...HEAD])
        expect(rows).toHaveLength(1)
        expect(await setting()).toBe('off')
      } finally {
        await client.query('commit')
      }
      expect(await setting()).toBe('on')
      // As a single statement (how the worker sends it): the pooled connection keeps its own setting.
      await client.query(sqlFor('claim-jobs', db.schema), ['cc', 10, 10, 30_000, 'w', ...HEAD])
      expect(await setting()).toBe('on')
    } finally {
      client.release()
      await queue.close()
    }
  })

  it('lock tokens: distinct within one claim, new on every re-claim, and a stale one completes nothing', async () => {
    const queue = new Queue('tokens', { connectionString: db.url, schema: db.schema, migrate: false })
    const claim = async (n: number) =>
      (await db.pool.query<{ id: string; lock_token: string }>(sqlFor('claim-jobs', db.schema), ['tokens', n, n, 30_000, 'w', ...HEAD])).rows
    try {
      await queue.addBulk(Array.from({ length: 50 }, (_, i) => ({ name: 'job', data: { i } })))
      const first = await claim(50)
      expect(first).toHaveLength(50)
      expect(new Set(first.map((r) => r.lock_token)).size).toBe(50)
      const stored = await db.pool.query(`select id::text, lock_token from "${db.schema}".jobs j where queue = 'tokens' order by j.id`)
      expect(stored.rows).toEqual([...first].sort((a, b) => Number(a.id) - Number(b.id)).map((r) => ({ id: r.id, lock_token: r.lock_token })))

      // Back to waiting (as rescue does), then claimed again: every job gets a token it never had.
      const seen = new Set(first.map((r) => r.lock_token))
      for (let round = 0; round < 5; round++) {
        await db.pool.query(`update "${db.schema}".jobs set state = 'waiting', lock_token = null, locked_until = null, locked_by = null where queue = 'tokens'`)
        const again = await claim(50)
        expect(again).toHaveLength(50)
        for (const r of again) {
          expect(seen.has(r.lock_token)).toBe(false)
          seen.add(r.lock_token)
        }
      }
      expect(seen.size).toBe(300)

      // The first claim's token of a job no longer completes it.
      const stale = first[0]!
      const { rows } = await db.pool.query(sqlFor('step-jobs', db.schema), [[stale.id], [stale.lock_token], [null], [], [], 30_000])
      expect(rows).toEqual([])
      const { rows: [job] } = await db.pool.query(`select state from "${db.schema}".jobs where id = $1`, [stale.id])
      expect(job.state).toBe('active')
    } finally {
      await queue.close()
    }
  })
})
