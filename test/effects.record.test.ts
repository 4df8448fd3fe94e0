// effects.record: the durable processed_effects ledger, written inside the caller's transaction (pg client, pool or Kysely).

import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects } from '../src/index.js'
import { freshSchema, type TestSchema } from './helpers/schema.js'
import { createRunsTable, runsOf } from './helpers/effects-support.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema
let effects: Effects
let clients: pg.Pool

beforeAll(async () => {
  db = await freshSchema('effects_record')
  await createRunsTable(db.pool, db.schema)
  effects = new Effects({ connectionString: db.url, schema: db.schema })
  clients = new pg.Pool({ connectionString: db.url, max: 4 })
})

afterAll(async () => {
  await effects.close()
  await clients.end()
  await db.drop()
})

async function ledger(key: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from "${db.schema}".processed_effects where effect_key = $1`,
    [key],
  )
  return rows[0]?.n ?? -1
}

/** Runs `body` in a transaction on its own client, then commits or rolls back as told (rolls back if it throws). */
async function inTransaction<T>(end: 'commit' | 'rollback', body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await clients.connect()
  try {
    await client.query('begin')
    let result: T
    try {
      result = await body(client)
    } catch (err) {
      await client.query('rollback')
      throw err
    }
    await client.query(end)
    return result
  } finally {
    client.release()
  }
}

describe('effects.record', () => {
  it('records nothing when the transaction rolls back; after a commit a second record returns false', async () => {
    const key = 'charge:invoice-42'
    expect(await inTransaction('rollback', (c) => effects.record(c, key))).toBe(true)
    expect(await ledger(key)).toBe(0)
    expect(await inTransaction('commit', (c) => effects.record(c, key))).toBe(true)
    expect(await ledger(key)).toBe(1)
    expect(await inTransaction('commit', (c) => effects.record(c, key))).toBe(false)
    expect(await effects.record(db.pool, key)).toBe(false)
    expect(await ledger(key)).toBe(1)
  })

  it('ties the ledger row and the effect together: a failed transaction leaves neither, the retry does both once', async () => {
    const key = 'charge:invoice-43'
    const chargeOnce = (client: pg.PoolClient, runner: string) => async () => {
      if (!(await effects.record(client, key))) return 'skipped'
      await client.query(`insert into "${db.schema}".effect_runs (key, runner) values ($1, $2)`, [key, runner])
      return 'charged'
    }
    await expect(
      inTransaction('commit', async (c) => {
        await chargeOnce(c, 'first')()
        throw new Error('gateway timeout')
      }),
    ).rejects.toThrow('gateway timeout')
    expect(await ledger(key)).toBe(0)
    expect(await inTransaction('commit', (c) => chargeOnce(c, 'retry')())).toBe('charged')
    expect(await inTransaction('commit', (c) => chargeOnce(c, 'replay')())).toBe('skipped')
    expect(await runsOf(db.pool, db.schema, key)).toEqual(['retry'])
    expect(await ledger(key)).toBe(1)
  })

  it('works inside a Kysely transaction', async () => {
    const kysely = new Kysely<Record<string, never>>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: db.url, max: 2 }) }),
    })
    try {
      const key = 'kysely:1'
      await expect(
        kysely.transaction().execute(async (trx) => {
          expect(await effects.record(trx, key)).toBe(true)
          throw new Error('roll back')
        }),
      ).rejects.toThrow('roll back')
      expect(await ledger(key)).toBe(0)
      expect(await kysely.transaction().execute((trx) => effects.record(trx, key))).toBe(true)
      expect(await kysely.transaction().execute((trx) => effects.record(trx, key))).toBe(false)
      expect(await ledger(key)).toBe(1)
    } finally {
      await kysely.destroy()
    }
  })

  for (const end of ['commit', 'rollback'] as const) {
    it(`a concurrent record of the same key waits for the first transaction, then answers ${end === 'commit' ? 'false' : 'true'} (first ${end}s)`, async () => {
      const key = `concurrent:${end}`
      const a = await clients.connect()
      const b = await clients.connect()
      try {
        await a.query('begin')
        await b.query('begin')
        expect(await effects.record(a, key)).toBe(true)
        const bPid = (await b.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid
        const second = effects.record(b, key)
        // Until the server shows b blocked on a's uncommitted row.
        await waitFor(
          async () =>
            (
              await db.pool.query<{ waiting: boolean }>(
                `select wait_event_type = 'Lock' as waiting from pg_stat_activity where pid = $1`,
                [bPid],
              )
            ).rows[0]?.waiting === true,
          30_000,
          'the second record to wait for the first transaction',
        )
        await a.query(end)
        expect(await second).toBe(end === 'rollback')
        await b.query('commit')
        expect(await ledger(key)).toBe(1)
      } finally {
        a.release()
        b.release()
      }
    })
  }

  it('at REPEATABLE READ, a key recorded and committed after the snapshot raises 40001; the retried transaction answers false', async () => {
    const key = `rr-${Math.random()}`
    const a = await clients.connect()
    try {
      await a.query('begin isolation level repeatable read')
      await a.query('select 1') // the snapshot
      expect(await inTransaction('commit', (c) => effects.record(c, key))).toBe(true)
      await expect(effects.record(a, key)).rejects.toMatchObject({ code: '40001' })
      await a.query('rollback')
      await a.query('begin isolation level repeatable read')
      expect(await effects.record(a, key)).toBe(false)
      await a.query('commit')
      expect(await ledger(key)).toBe(1)
    } finally {
      await a.query('rollback').catch(() => {})
      a.release()
    }
  })
})
