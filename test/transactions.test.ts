// add/addBulk with the caller's `tx` (docs/deduplication.md#inside-your-transaction): the job exists only if the caller commits; pgonce sends no BEGIN/COMMIT.

import { CompiledQuery, Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeduplicationError, Queue } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema
let queue: Queue<{ n: number }>
let kysely: Kysely<unknown>

beforeAll(async () => {
  db = await freshSchema('transactions')
  queue = new Queue('tx', { connectionString: db.url, schema: db.schema })
  kysely = new Kysely({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: db.url, max: 2 }) }) })
})
afterAll(async () => {
  await queue.close()
  await kysely.destroy()
  await db.drop()
})

/** Rows with this name, seen from outside any caller transaction. */
async function committedRows(name: string): Promise<number> {
  const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where name = $1`, [name])
  return rows[0].n
}

const TX_CONTROL =
  /^\s*(begin|start\s+transaction|commit|end|rollback|abort|savepoint|release|prepare\s+transaction)\b/i

/** Records the text of every statement sent on a pg client. */
function recordStatements(client: pg.ClientBase): string[] {
  const sent: string[] = []
  const query = client.query.bind(client) as (...args: unknown[]) => unknown
  ;(client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const first = args[0]
    sent.push(typeof first === 'string' ? first : String((first as { text?: string }).text))
    return query(...args)
  }
  return sent
}

describe("add inside the caller's transaction", () => {
  for (const outcome of ['rollback', 'commit'] as const) {
    it(`pg PoolClient inside BEGIN: visible only inside before commit; ${outcome}`, async () => {
      const name = `poolclient-${outcome}`
      const client = await db.pool.connect()
      try {
        await client.query('begin')
        const sent = recordStatements(client)
        const job = await queue.add(name, { n: 1 }, { tx: client, jobId: name })
        const bulk = await queue.addBulk(
          [
            { name, data: { n: 2 } },
            { name, data: { n: 3 } },
          ],
          { tx: client },
        )
        expect(sent.filter((s) => TX_CONTROL.test(s))).toEqual([])
        expect(sent).toHaveLength(2)
        const inside = await client.query(`select count(*)::int as n from "${db.schema}".jobs where name = $1`, [name])
        expect(inside.rows[0].n).toBe(3)
        expect(await committedRows(name)).toBe(0)
        await client.query(outcome)
        const expected = outcome === 'commit' ? 3 : 0
        expect(await committedRows(name)).toBe(expected)
        expect((await queue.getJob(job.id))?.id).toBe(outcome === 'commit' ? job.id : undefined)
        expect(await queue.getJobByCustomId(name)).toEqual(
          outcome === 'commit' ? expect.objectContaining({ id: job.id }) : null,
        )
        expect(bulk).toHaveLength(2)
      } finally {
        client.release()
      }
    })

    it(`pg Client inside BEGIN: ${outcome}`, async () => {
      const name = `client-${outcome}`
      const client = new pg.Client({ connectionString: db.url })
      await client.connect()
      try {
        await client.query('begin')
        const sent = recordStatements(client)
        await queue.add(name, { n: 1 }, { tx: client })
        await queue.addBulk([{ name, data: { n: 2 } }], { tx: client })
        expect(sent.filter((s) => TX_CONTROL.test(s))).toEqual([])
        expect(await committedRows(name)).toBe(0)
        await client.query(outcome)
        expect(await committedRows(name)).toBe(outcome === 'commit' ? 2 : 0)
      } finally {
        await client.end()
      }
    })

    it(`Kysely db.transaction().execute(): ${outcome}`, async () => {
      const name = `kysely-${outcome}`
      let insideCount = -1
      const run = kysely.transaction().execute(async (trx) => {
        await queue.add(name, { n: 1 }, { tx: trx, deduplication: { id: name } })
        await queue.addBulk([{ name, data: { n: 2 } }], { tx: trx })
        const { rows } = await trx.executeQuery<{ n: number }>(
          CompiledQuery.raw(`select count(*)::int as n from "${db.schema}".jobs where name = $1`, [name]),
        )
        insideCount = rows[0]?.n ?? -1
        expect(await committedRows(name)).toBe(0)
        if (outcome === 'rollback') throw new Error('roll it back')
      })
      if (outcome === 'rollback') await expect(run).rejects.toThrow('roll it back')
      else await run
      expect(insideCount).toBe(2)
      expect(await committedRows(name)).toBe(outcome === 'commit' ? 2 : 0)
      const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".dedup_keys where key = $1`, [
        name,
      ])
      expect(rows[0].n).toBe(outcome === 'commit' ? 1 : 0)
    })
  }

  it('a Kysely instance (no transaction) as tx commits on its own', async () => {
    const job = await queue.add('kysely-instance', { n: 1 }, { tx: kysely })
    expect(await committedRows('kysely-instance')).toBe(1)
    expect((await queue.getJob(job.id))?.name).toBe('kysely-instance')
  })

  it("a rejected add (EXTEND_NOT_PENDING) inside the caller's transaction leaves it usable", async () => {
    const owner = await queue.add('extend-owner', { n: 1 }, { deduplication: { id: 'tx-extend', ttl: 60_000 } })
    await db.pool.query(`update "${db.schema}".jobs set state = 'active' where id = $1`, [owner.id])
    const client = await db.pool.connect()
    try {
      await client.query('begin')
      await queue.add('before', { n: 1 }, { tx: client })
      const err = await queue
        .add('extend-try', { n: 2 }, { tx: client, deduplication: { id: 'tx-extend', ttl: 60_000, extend: true } })
        .catch((e: unknown) => e)
      expect(err).toBeInstanceOf(DeduplicationError)
      expect(err).toMatchObject({ code: 'EXTEND_NOT_PENDING', ownerId: owner.id, key: 'tx-extend' })
      expect((err as Error).message).toContain('Duplicate unique_key (extended TTL)')
      await queue.add('after', { n: 3 }, { tx: client })
      await client.query('commit')
    } finally {
      client.release()
    }
    expect(await committedRows('before')).toBe(1)
    expect(await committedRows('after')).toBe(1)
    expect(await committedRows('extend-try')).toBe(0)
  })
})
