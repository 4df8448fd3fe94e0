// The claim statement commits without waiting for the WAL flush (synchronous_commit off for its own transaction only),
// and the setting never outlives it on a pooled connection. Its lock tokens (a random part per claim, the job id for
// the rest) must still fence: distinct jobs, distinct tokens; a re-claim, a new token.

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

describe('claim-due-jobs commit mode', () => {
  it('is synchronous_commit off inside the claim transaction (whether it claims or signs up), and on again after it', async () => {
    const queue = new Queue('cc', { connectionString: db.url, schema: db.schema, migrate: false })
    const client = await db.pool.connect()
    const setting = async () => (await client.query<{ synchronous_commit: string }>('show synchronous_commit')).rows[0]!.synchronous_commit
    try {
      await queue.add('a', {})
      expect(await setting()).toBe('on')
      for (const [label, expected] of [['claims one job', 1], ['claims nothing and signs up', 0]] as const) {
        await client.query('begin')
        const { rows } = await client.query(sqlFor('claim-due-jobs', db.schema), ['cc', 10, 30_000, 'w', '42', 5_000])
        expect(rows, label).toHaveLength(expected)
        expect(await setting(), label).toBe('off')
        await client.query('commit')
        expect(await setting(), label).toBe('on')
      }
      const { rows: signUps } = await db.pool.query(`select worker_id from "${db.schema}".idle_workers where queue = 'cc'`)
      expect(signUps).toEqual([{ worker_id: 'w' }])
      // As a single statement (how the worker sends it): the pooled connection keeps its own setting.
      await client.query(sqlFor('claim-due-jobs', db.schema), ['cc', 10, 30_000, 'w', '42', 5_000])
      expect(await setting()).toBe('on')
    } finally {
      client.release()
      await queue.close()
    }
  })

  it('lock tokens: distinct within one claim, new on every re-claim, and a stale one completes nothing', async () => {
    const queue = new Queue('tokens', { connectionString: db.url, schema: db.schema, migrate: false })
    const claim = async (n: number) =>
      (await db.pool.query<{ id: string; lock_token: string }>(sqlFor('claim-due-jobs', db.schema), ['tokens', n, 30_000, 'w', null, 5_000])).rows
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
      const { rows } = await db.pool.query(sqlFor('complete-jobs', db.schema), [[stale.id], [stale.lock_token], [null], 'active'])
      expect(rows).toEqual([])
      const { rows: [job] } = await db.pool.query(`select state from "${db.schema}".jobs where id = $1`, [stale.id])
      expect(job.state).toBe('active')
    } finally {
      await queue.close()
    }
  })
})
