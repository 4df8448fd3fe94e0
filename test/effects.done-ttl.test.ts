// doneTtl bounds how long a done marker keeps runOnce callers out; without it the marker stays.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects } from '../src/index.js'
import { freshSchema, type TestSchema } from './helpers/schema.js'
import { claimRow, createRunsTable, recordRun, runsOf } from './helpers/effects-support.js'

let db: TestSchema
let effects: Effects

beforeAll(async () => {
  db = await freshSchema('effects_done_ttl')
  await createRunsTable(db.pool, db.schema)
  effects = new Effects({ connectionString: db.url, schema: db.schema })
})

afterAll(async () => {
  await effects.close()
  await db.drop()
})

const run = (key: string, runner: string, opts?: { doneTtl?: number }) =>
  effects.runOnce(key, () => recordRun(db.pool, db.schema, key, runner), opts)

describe('doneTtl', () => {
  it('keeps duplicates out until the marker expires (database clock), then the next runOnce runs again', async () => {
    const key = 'notify:push:7:99'
    expect(await run(key, 'first', { doneTtl: 86_400_000 })).toBe('ran')
    const { rows } = await db.pool.query<{ ms: number }>(
      `select extract(epoch from expires_at - now()) * 1000 as ms from "${db.schema}".execution_claims where key = $1`,
      [key],
    )
    expect(Number(rows[0]?.ms)).toBeGreaterThan(86_000_000)
    expect(Number(rows[0]?.ms)).toBeLessThanOrEqual(86_400_000)
    expect(await claimRow(db.pool, db.schema, key)).toMatchObject({ state: 'done', token: null })
    expect(await run(key, 'retry+2s')).toBe('duplicate-done')
    // Three days later: the 24-hour window has passed.
    await db.pool.query(
      `update "${db.schema}".execution_claims set expires_at = now() - interval '2 days' where key = $1`,
      [key],
    )
    expect(await run(key, 'replay+3d', { doneTtl: 86_400_000 })).toBe('ran')
    expect(await runsOf(db.pool, db.schema, key)).toEqual(['first', 'replay+3d'])
    expect(await run(key, 'again')).toBe('duplicate-done')
  })

  it('omitted: the done marker has no expiry and keeps every later call out', async () => {
    const key = 'charge:invoice-9'
    const dupsBefore = effects.outcomes.get('duplicate-done')
    expect(await run(key, 'first')).toBe('ran')
    expect(await claimRow(db.pool, db.schema, key)).toEqual({ state: 'done', token: null, expires_at: null })
    // Housekeeping never removes a marker without expiry.
    const { rows } = await db.pool.query(
      `select * from "${db.schema}".execution_claims where key = $1 and expires_at <= now()`,
      [key],
    )
    expect(rows).toHaveLength(0)
    expect(await run(key, 'second')).toBe('duplicate-done')
    expect(await run(key, 'third', { doneTtl: 1 })).toBe('duplicate-done')
    expect(await runsOf(db.pool, db.schema, key)).toEqual(['first'])
    expect(effects.outcomes.get('duplicate-done')).toBe(dupsBefore + 2)
  })
})
