// timeoutMs on every add path (add, addBulk plain and keyed, a replace through sql/add-job-ending.sql, the Redis layer's
// sql/add-job-cached.sql, add_job(timeout_ms) and add_jobs() items) is stored on the job; a bad one, on an add or as a
// Worker option, is refused before any I/O, naming the field.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, ValidationError, Worker } from '../src/index.js'
import { REDIS_URL, deleteSchemaKeys, redisAvailable, testClient } from './helpers/redis-support.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

const redisOk = await redisAvailable('queue.timeout.test.ts')
let db: TestSchema
let queue: Queue

beforeAll(async () => {
  db = await freshSchema('queue_timeout')
  queue = new Queue('timeout', { connectionString: db.url, schema: db.schema })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

async function storedTimeouts(ids: string[]): Promise<(number | null)[]> {
  const { rows } = await db.pool.query<{ id: string; timeout_ms: number | null }>(
    `select id::text, timeout_ms from "${db.schema}".jobs where id = any($1::bigint[])`,
    [ids],
  )
  return ids.map((id) => rows.find((r) => r.id === id)?.timeout_ms ?? null)
}

async function jobCount(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`select count(*)::int as n from "${db.schema}".jobs`)
  return rows[0]!.n
}

describe('timeoutMs is stored by every add path', () => {
  it('add: plain, with a jobId, and read back by getJob', async () => {
    const plain = await queue.add('p', {}, { timeoutMs: 1_000 })
    const keyed = await queue.add('k', {}, { timeoutMs: 2_000, jobId: 'timeout-keyed' })
    const none = await queue.add('n', {})
    expect([plain.timeoutMs, keyed.timeoutMs, none.timeoutMs]).toEqual([1_000, 2_000, null])
    expect(await storedTimeouts([plain.id, keyed.id, none.id])).toEqual([1_000, 2_000, null])
    expect((await queue.getJob(keyed.id))?.timeoutMs).toBe(2_000)
    // A duplicate answers with the stored job, its timeout included.
    expect((await queue.add('k', {}, { jobId: 'timeout-keyed' })).timeoutMs).toBe(2_000)
  })

  it('addBulk: a plain batch and a keyed one', async () => {
    const plain = await queue.addBulk([
      { name: 'a', data: {}, opts: { timeoutMs: 10 } },
      { name: 'b', data: {} },
    ])
    const keyed = await queue.addBulk([
      { name: 'c', data: {}, opts: { timeoutMs: 30, deduplication: { id: 'timeout-bulk' } } },
      { name: 'd', data: {}, opts: { timeoutMs: 40 } },
      { name: 'e', data: {} },
    ])
    expect(await storedTimeouts([...plain, ...keyed].map((j) => j.id))).toEqual([10, null, 30, 40, null])
    expect(keyed.map((j) => j.timeoutMs)).toEqual([30, 40, null])
  })

  it('a keyed add that replaces (sql/add-job-ending.sql)', async () => {
    await queue.add('r', {}, { deduplication: { id: 'timeout-ending' } })
    const job = await queue.add('r', {}, { timeoutMs: 50, deduplication: { id: 'timeout-ending', replace: true } })
    expect(job.outcome).toBe('replaced')
    expect(await storedTimeouts([job.id])).toEqual([50])
  })

  it.runIf(redisOk)('a keyed add through the Redis layer (sql/add-job-cached.sql)', async () => {
    const cached = new Queue('timeout', { connectionString: db.url, schema: db.schema, redis: REDIS_URL })
    const client = testClient(REDIS_URL as string)
    try {
      const job = await cached.add('c', {}, { timeoutMs: 60, deduplication: { id: 'timeout-cached', ttl: 60_000 } })
      expect(job.outcome).toBe('added')
      expect(await storedTimeouts([job.id])).toEqual([60])
    } finally {
      await cached.close()
      await deleteSchemaKeys(client, db.schema)
      client.disconnect()
    }
  })

  it('add_job(timeout_ms) and add_jobs() items with timeoutMs; a timeout that is not positive is refused', async () => {
    const s = `"${db.schema}"`
    const one = await db.pool.query<{ id: string; timeout_ms: number }>(
      `select (a.job).id::text, (a.job).timeout_ms from ${s}.add_job('sql', 'x', timeout_ms => 70) a`,
    )
    expect(one.rows[0]?.timeout_ms).toBe(70)
    const many = await db.pool.query<{ timeout_ms: number | null }>(
      `select (a.job).timeout_ms from ${s}.add_jobs('sql', '[{"name":"a","timeoutMs":80},{"name":"b","jobId":"t-sql"}]') a
       order by a.ordinal`,
    )
    expect(many.rows.map((r) => r.timeout_ms)).toEqual([80, null])
    expect(await storedTimeouts([one.rows[0]!.id])).toEqual([70])
    const before = await jobCount()
    for (const call of [
      `${s}.add_job('sql', 'x', timeout_ms => 0)`,
      `${s}.add_jobs('sql', '[{"name":"x","timeoutMs":-1}]')`,
    ])
      await expect(db.pool.query(`select ${call}`)).rejects.toMatchObject({ code: '23514' })
    expect(await jobCount()).toBe(before)
  })
})

describe('a bad timeoutMs', () => {
  const bad: [string, unknown, ValidationError['code']][] = [
    ['0', 0, 'OUT_OF_RANGE'],
    ['a negative number', -1, 'OUT_OF_RANGE'],
    ['a fraction', 1.5, 'NOT_INTEGER'],
    ['a string', 'x', 'INVALID_TYPE'],
    ['more than a timer can wait', 2 ** 31, 'OUT_OF_RANGE'],
  ]

  it.each(bad)('%s is refused by add and addBulk before any I/O', async (_what, timeoutMs, code) => {
    // A pool that counts what is asked of it: a refused add asks nothing (not even the first-use migration).
    let io = 0
    const pool = new pg.Pool({ connectionString: db.url, max: 1 })
    for (const method of ['query', 'connect'] as const) {
      const original = (pool[method] as (...args: unknown[]) => unknown).bind(pool)
      ;(pool as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
        io++
        return original(...args)
      }
    }
    const probe = new Queue('timeout', { pool, schema: db.schema })
    try {
      await expect(probe.add('x', {}, { timeoutMs: timeoutMs as number })).rejects.toMatchObject({
        name: 'ValidationError',
        code,
        field: 'opts.timeoutMs',
      })
      await expect(
        probe.addBulk([{ name: 'x', data: {}, opts: { timeoutMs: timeoutMs as number } }]),
      ).rejects.toMatchObject({ code, field: 'items[0].opts.timeoutMs' })
      expect(io).toBe(0)
    } finally {
      await probe.close()
      await pool.end()
    }
  })

  it.each(bad)('%s is refused as a Worker option by the constructor', (_what, timeoutMs, code) => {
    let err: unknown
    try {
      new Worker('timeout', async () => {}, {
        connectionString: db.url,
        schema: db.schema,
        timeoutMs: timeoutMs as number,
      })
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(ValidationError)
    expect(err).toMatchObject({ code, field: 'options.timeoutMs' })
  })
})
