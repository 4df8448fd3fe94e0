// runOnce under real concurrency: 8 Effects on 8 pools started together run the work exactly once.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, type RunOnceOutcome } from '../src/index.js'
import { freshSchema, type TestSchema } from './helpers/schema.js'
import { claimRow, createRunsTable, deferred, recordRun, runsOf } from './helpers/effects-support.js'

const CONTENDERS = 8
const ROUNDS = 10

let db: TestSchema
let contenders: Effects[] = []

beforeAll(async () => {
  db = await freshSchema('effects_concurrent')
  await createRunsTable(db.pool, db.schema)
  contenders = Array.from(
    { length: CONTENDERS },
    () => new Effects({ connectionString: db.url, schema: db.schema, poolSize: 2 }),
  )
  // Connect and pass the migration check first, so the contenders meet at the claim itself.
  await Promise.all(contenders.map((e, i) => e.runOnce(`warm-up:${i}`, () => {})))
})

afterAll(async () => {
  await Promise.all(contenders.map((e) => e.close()))
  await db.drop()
})

/** Starts every contender's runOnce in the same tick, once all are waiting at the barrier. */
async function race<T>(start: (e: Effects, i: number) => Promise<T>): Promise<PromiseSettledResult<T>[]> {
  const barrier = deferred()
  const all = Promise.allSettled(
    contenders.map(async (e, i) => {
      await barrier.promise
      return start(e, i)
    }),
  )
  barrier.resolve()
  return all
}

describe('runOnce with 8 concurrent callers on one key', () => {
  it('runs the work exactly once per key; every other caller gets a duplicate outcome', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const key = `notify:push:42:${round}`
      const settled = await race((e, i) =>
        e.runOnce(key, async () => {
          await recordRun(db.pool, db.schema, key, `c${i}`)
          // Widen the window in which the others find the claim running.
          await db.pool.query('select pg_sleep(0.02)')
        }),
      )
      const outcomes = settled.map((s) => {
        if (s.status === 'rejected') throw s.reason
        return s.value
      })
      expect(outcomes.filter((o) => o === 'ran')).toHaveLength(1)
      expect(outcomes.filter((o) => o === 'duplicate-running' || o === 'duplicate-done')).toHaveLength(CONTENDERS - 1)
      const runs = await runsOf(db.pool, db.schema, key)
      expect(runs).toEqual([`c${outcomes.indexOf('ran')}`])
      expect(await claimRow(db.pool, db.schema, key)).toMatchObject({ state: 'done', token: null, expires_at: null })
    }
    const total = (o: RunOnceOutcome | 'claim-lost') => contenders.reduce((n, e) => n + e.outcomes.get(o), 0)
    expect(total('ran')).toBe(ROUNDS + CONTENDERS) // + the warm-ups
    expect(total('duplicate-running') + total('duplicate-done')).toBe(ROUNDS * (CONTENDERS - 1))
    expect(total('claim-lost')).toBe(0)
  })

  it('never answers duplicate-done while holders keep failing and releasing; the failures all ran the work', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const key = `flaky:${round}`
      const settled = await race((e, i) =>
        e.runOnce(key, async () => {
          await recordRun(db.pool, db.schema, key, `c${i}`)
          throw new Error(`boom c${i}`)
        }),
      )
      const failed = settled.filter((s) => s.status === 'rejected')
      const answered = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []))
      expect(failed.length).toBeGreaterThanOrEqual(1)
      for (const f of failed) expect(String(f.reason)).toMatch(/^Error: boom c\d$/)
      expect(answered.every((o) => o === 'duplicate-running')).toBe(true)
      // Each failure is one run of the work, and each released its claim: nothing is left.
      expect(await runsOf(db.pool, db.schema, key)).toHaveLength(failed.length)
      expect(await claimRow(db.pool, db.schema, key)).toBeUndefined()
    }
  })
})
