// sql/delete-expired-claims.sql: deletes expired claims and done markers in bounded batches, never live ones.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sqlFor } from '../src/db/sql-files.js'
import { freshSchema, type TestSchema } from './helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('effects_housekeeping')
})

afterAll(async () => {
  await db.drop()
})

async function seed(prefix: string, state: 'running' | 'done', count: number, expires: string | null): Promise<void> {
  await db.pool.query(
    `insert into "${db.schema}".execution_claims (key, state, token, expires_at)
     select $1 || g, $2, case when $2 = 'running' then gen_random_uuid() end, ${expires === null ? 'null' : `now() + $4::interval`}
     from generate_series(1, $3::int) g`,
    expires === null ? [prefix, state, count] : [prefix, state, count, expires],
  )
}

const sweep = async (limit: number): Promise<number> =>
  (await db.pool.query<{ count: number }>(sqlFor('delete-expired-claims', db.schema), [limit])).rows[0]?.count ?? -1

async function remaining(): Promise<string[]> {
  const { rows } = await db.pool.query<{ key: string }>(`select key from "${db.schema}".execution_claims order by key`)
  return rows.map((r) => r.key)
}

describe('delete-expired-claims', () => {
  it('deletes expired claims and expired done markers, at most $1 per call, and keeps live claims and markers', async () => {
    await seed('expired-running-', 'running', 13, '-1 minute')
    await seed('expired-done-', 'done', 12, '-3 days')
    await seed('live-running-', 'running', 3, '5 minutes')
    await seed('live-done-', 'done', 3, '1 day')
    await seed('forever-done-', 'done', 4, null)
    expect(await sweep(10)).toBe(10)
    expect(await sweep(10)).toBe(10)
    expect(await sweep(10)).toBe(5)
    expect(await sweep(10)).toBe(0)
    const left = await remaining()
    expect(left).toHaveLength(10)
    expect(left.every((k) => /^(live-running|live-done|forever-done)-/.test(k))).toBe(true)
  })

  it('concurrent sweeps split the work (skip locked) and delete each expired row once', async () => {
    await db.pool.query(`delete from "${db.schema}".execution_claims`)
    await seed('old-', 'done', 200, '-1 hour')
    await seed('keep-', 'running', 5, '1 hour')
    const counts = await Promise.all(
      [0, 1, 2, 3].map(async () => {
        let total = 0
        for (let n = await sweep(25); n > 0; n = await sweep(25)) total += n
        return total
      }),
    )
    expect(counts.reduce((a, b) => a + b, 0)).toBe(200)
    expect(await remaining()).toHaveLength(5)
  })
})
