// runOnce takes over a crashed holder's expired claim, and a stale holder's release or completion never touches the new owner's claim.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects } from '../src/index.js'
import { freshSchema, type TestSchema } from './helpers/schema.js'
import { captureLogger, claimRow, createRunsTable, deferred, recordRun, runsOf } from './helpers/effects-support.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema
let stale: Effects
let fresh: Effects
const staleLog = captureLogger()

beforeAll(async () => {
  db = await freshSchema('effects_takeover')
  await createRunsTable(db.pool, db.schema)
  stale = new Effects({ connectionString: db.url, schema: db.schema, logger: staleLog.logger })
  fresh = new Effects({ connectionString: db.url, schema: db.schema })
})

afterAll(async () => {
  await stale.close()
  await fresh.close()
  await db.drop()
})

/** Moves a claim's expiry into the past by the database clock. */
async function expireClaim(key: string): Promise<void> {
  const { rowCount } = await db.pool.query(
    `update "${db.schema}".execution_claims set expires_at = now() - interval '1 second' where key = $1`,
    [key],
  )
  expect(rowCount).toBe(1)
}

describe('a claim left by a crashed holder', () => {
  it('is taken over once it expired (backdated) and the work runs', async () => {
    const key = 'crashed:backdated'
    await db.pool.query(
      `insert into "${db.schema}".execution_claims (key, state, token, expires_at)
       values ($1, 'running', gen_random_uuid(), now() - interval '1 millisecond')`,
      [key],
    )
    const outcome = await fresh.runOnce(key, () => recordRun(db.pool, db.schema, key, 'fresh'))
    expect(outcome).toBe('ran')
    expect(await runsOf(db.pool, db.schema, key)).toEqual(['fresh'])
    expect(await claimRow(db.pool, db.schema, key)).toMatchObject({ state: 'done', token: null, expires_at: null })
  })

  it('blocks others while unexpired, then is taken over after a short claimTtl', async () => {
    const key = 'crashed:short-ttl'
    const holding = deferred()
    const started = deferred()
    // The "crashed" holder: its work never finishes while we look.
    const holder = stale.runOnce(
      key,
      async () => {
        started.resolve()
        await holding.promise
      },
      { claimTtl: 4000 },
    )
    await started.promise
    expect(await fresh.runOnce(key, () => recordRun(db.pool, db.schema, key, 'early'))).toBe('duplicate-running')
    // Until the claim has expired by the database clock.
    await waitFor(
      async () =>
        (
          await db.pool.query<{ expired: boolean }>(
            `select expires_at <= now() as expired from "${db.schema}".execution_claims where key = $1`,
            [key],
          )
        ).rows[0]?.expired === true,
      30_000,
      'the claim to expire',
    )
    expect(await fresh.runOnce(key, () => recordRun(db.pool, db.schema, key, 'fresh'))).toBe('ran')
    expect(await runsOf(db.pool, db.schema, key)).toEqual(['fresh'])
    holding.resolve()
    expect(await holder).toBe('ran') // its work did run, but its claim was lost
    expect(stale.outcomes.get('claim-lost')).toBe(1)
    expect(await claimRow(db.pool, db.schema, key)).toMatchObject({ state: 'done', token: null })
  })

  it('sets expires_at from the database clock: now() + claimTtl while running', async () => {
    const key = 'clock:claim'
    let remaining = NaN
    await fresh.runOnce(
      key,
      async () => {
        const { rows } = await db.pool.query<{ ms: number }>(
          `select extract(epoch from expires_at - now()) * 1000 as ms from "${db.schema}".execution_claims where key = $1`,
          [key],
        )
        remaining = Number(rows[0]?.ms)
      },
      { claimTtl: 120_000 },
    )
    expect(remaining).toBeGreaterThan(60_000)
    expect(remaining).toBeLessThanOrEqual(120_000)
  })
})

describe('a stale holder whose claim expired and was taken over', () => {
  /** Stale claims the key, stalls; its claim expires and fresh takes it over with work still running. */
  async function staleThenFresh(key: string) {
    const staleGo = deferred<'fail' | 'succeed'>()
    const staleIn = deferred()
    const staleRun = stale.runOnce(key, async () => {
      staleIn.resolve()
      if ((await staleGo.promise) === 'fail') throw new Error('stale work failed')
    })
    await staleIn.promise
    await expireClaim(key)
    const freshGo = deferred()
    const freshIn = deferred()
    const freshRun = fresh.runOnce(key, async () => {
      freshIn.resolve()
      await freshGo.promise
      await recordRun(db.pool, db.schema, key, 'fresh')
    })
    await freshIn.promise
    const owner = await claimRow(db.pool, db.schema, key)
    expect(owner?.state).toBe('running')
    expect(owner?.token).toMatch(/^[0-9a-f-]{36}$/)
    return { staleGo, staleRun, freshGo, freshRun, freshToken: owner?.token as string }
  }

  it("cannot release the new owner's claim when its work fails", async () => {
    const key = 'stale:release'
    const s = await staleThenFresh(key)
    s.staleGo.resolve('fail')
    await expect(s.staleRun).rejects.toThrow('stale work failed')
    expect(await claimRow(db.pool, db.schema, key)).toMatchObject({ state: 'running', token: s.freshToken })
    // Nobody else gets in while the new owner works.
    expect(await stale.runOnce(key, () => recordRun(db.pool, db.schema, key, 'intruder'))).toBe('duplicate-running')
    s.freshGo.resolve()
    expect(await s.freshRun).toBe('ran')
    expect(await runsOf(db.pool, db.schema, key)).toEqual(['fresh'])
    expect(await claimRow(db.pool, db.schema, key)).toMatchObject({ state: 'done', token: null })
  })

  it("cannot complete the new owner's claim; it reports the loss (warning + claim-lost) and still says ran", async () => {
    const key = 'stale:complete'
    const lostBefore = stale.outcomes.get('claim-lost')
    const warnsBefore = staleLog.entries.filter((e) => e.level === 'warn').length
    const s = await staleThenFresh(key)
    s.staleGo.resolve('succeed')
    expect(await s.staleRun).toBe('ran')
    expect(stale.outcomes.get('claim-lost')).toBe(lostBefore + 1)
    const warns = staleLog.entries.filter((e) => e.level === 'warn')
    expect(warns).toHaveLength(warnsBefore + 1)
    expect(warns.at(-1)?.msg).toMatch(/claim lost/)
    expect(warns.at(-1)?.obj).toMatchObject({ key })
    // The new owner's claim is untouched: still running, same token, not marked done.
    expect(await claimRow(db.pool, db.schema, key)).toMatchObject({ state: 'running', token: s.freshToken })
    expect(await fresh.runOnce(key, () => recordRun(db.pool, db.schema, key, 'intruder'))).toBe('duplicate-running')
    s.freshGo.resolve()
    expect(await s.freshRun).toBe('ran')
    expect(await claimRow(db.pool, db.schema, key)).toMatchObject({ state: 'done', token: null })
    expect(await runsOf(db.pool, db.schema, key)).toEqual(['fresh'])
  })

  it('a completion that finds its claim removed is reported as claim-lost too', async () => {
    const key = 'stale:removed'
    const lostBefore = stale.outcomes.get('claim-lost')
    const outcome = await stale.runOnce(key, async () => {
      await db.pool.query(`delete from "${db.schema}".execution_claims where key = $1`, [key])
    })
    expect(outcome).toBe('ran')
    expect(stale.outcomes.get('claim-lost')).toBe(lostBefore + 1)
    expect(await claimRow(db.pool, db.schema, key)).toBeUndefined()
  })
})
