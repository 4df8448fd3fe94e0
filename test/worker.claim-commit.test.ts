// The claim statement commits without waiting for the WAL flush (synchronous_commit off for its own transaction only), and the setting never outlives it on a pooled connection.

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
})
