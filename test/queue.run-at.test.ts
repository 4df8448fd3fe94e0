// runAt: a job added for an instant is due then by the database clock (add, addBulk, add_job(), add_jobs(), keyed adds
// with and without Redis); a past instant is due now; runAt with delay, or a runAt that names no instant, is refused
// before anything is written.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, ValidationError, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitForState } from './helpers/jobs.js'
import { REDIS_URL, deleteSchemaKeys, redisAvailable, testClient } from './helpers/redis-support.js'

const redisOk = await redisAvailable('queue.run-at.test.ts')
let db: TestSchema
let queue: Queue

beforeAll(async () => {
  db = await freshSchema('run_at')
  queue = new Queue('run-at', { connectionString: db.url, schema: db.schema })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

/** The database clock, in epoch ms. */
async function dbNowMs(): Promise<number> {
  const { rows } = await db.pool.query<{ ms: number }>('select (extract(epoch from now()) * 1000)::float8 as ms')
  return rows[0]!.ms
}

async function row(id: string): Promise<{ state: string; run_at_ms: number; created_at_ms: number }> {
  const { rows } = await db.pool.query(
    `select state, (extract(epoch from run_at) * 1000)::float8 as run_at_ms,
            (extract(epoch from created_at) * 1000)::float8 as created_at_ms
     from "${db.schema}".jobs where id = $1`,
    [id],
  )
  return rows[0]
}

async function jobCount(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`select count(*)::int as n from "${db.schema}".jobs`)
  return rows[0]!.n
}

describe('runAt', () => {
  it('does not start a job before its runAt by the database clock', async () => {
    const q = new Queue('run-at-worker', { connectionString: db.url, schema: db.schema, migrate: false })
    // Polling once a minute: only its due timer can start the job on time.
    const sleepy = { pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false }
    const worker = new Worker('run-at-worker', async () => {}, {
      connectionString: db.url,
      schema: db.schema,
      ...sleepy,
    })
    try {
      await worker.run()
      const runAt = new Date((await dbNowMs()) + 1_500)
      const job = await q.add('later', {}, { runAt })
      expect(job.state).toBe('delayed')
      expect(Math.abs(job.runAt.getTime() - runAt.getTime())).toBeLessThanOrEqual(1)
      await waitForState(db, job.id, 'completed', 20_000)
      const { rows } = await db.pool.query<{ early: boolean; late_ms: number }>(
        `select started_at < run_at or run_at < $2::timestamptz as early,
                (extract(epoch from started_at - run_at) * 1000)::float8 as late_ms
         from "${db.schema}".jobs where id = $1`,
        [job.id, runAt.toISOString()],
      )
      expect(rows[0]!.early).toBe(false)
      expect(rows[0]!.late_ms).toBeLessThan(5_000)
    } finally {
      await worker.close()
      await q.close()
    }
  })

  it('takes a Date, an ISO string with an offset and epoch ms alike', async () => {
    const at = Math.round(await dbNowMs()) + 3_600_000
    const iso = new Date(at).toISOString().replace('Z', '+00:00')
    for (const runAt of [new Date(at), iso, at]) {
      const job = await queue.add('at', {}, { runAt })
      const r = await row(job.id)
      expect(r.state).toBe('delayed')
      expect(Math.abs(r.run_at_ms - at)).toBeLessThanOrEqual(1)
      expect(r.run_at_ms).toBeGreaterThanOrEqual(at)
    }
  })

  it('makes a job with a runAt in the past due now', async () => {
    const job = await queue.add('past', {}, { runAt: '2001-01-01T00:00:00Z' })
    const r = await row(job.id)
    expect(r.state).toBe('waiting')
    expect(r.run_at_ms).toBe(r.created_at_ms)
  })

  it('is honoured by addBulk, plain items and keyed ones in one batch', async () => {
    const at = Math.round(await dbNowMs()) + 600_000
    const jobs = await queue.addBulk([
      { name: 'a', data: {}, opts: { runAt: at } },
      { name: 'b', data: {}, opts: { runAt: new Date(at), jobId: 'run-at-bulk' } },
      { name: 'c', data: {}, opts: { delay: 1_000 } },
      { name: 'd', data: {} },
    ])
    for (const j of jobs.slice(0, 2)) {
      const r = await row(j.id)
      expect(r.state).toBe('delayed')
      expect(r.run_at_ms).toBeGreaterThanOrEqual(at)
      expect(r.run_at_ms - at).toBeLessThanOrEqual(1)
    }
    expect((await row(jobs[2]!.id)).run_at_ms - (await row(jobs[2]!.id)).created_at_ms).toBe(1_000)
    expect((await row(jobs[3]!.id)).state).toBe('waiting')
  })

  it('is honoured by a keyed add that replaces (sql/add-job-ending.sql)', async () => {
    const at = Math.round(await dbNowMs()) + 600_000
    await queue.add('k', {}, { deduplication: { id: 'run-at-ending' } })
    const job = await queue.add('k', {}, { runAt: at, deduplication: { id: 'run-at-ending', replace: true } })
    expect(job.outcome).toBe('replaced')
    const r = await row(job.id)
    expect(r.state).toBe('delayed')
    expect(r.run_at_ms - at).toBeGreaterThanOrEqual(0)
    expect(r.run_at_ms - at).toBeLessThanOrEqual(1)
  })

  it.runIf(redisOk)('is honoured by a keyed add through the Redis layer (sql/add-job-cached.sql)', async () => {
    const cached = new Queue('run-at', { connectionString: db.url, schema: db.schema, redis: REDIS_URL })
    const client = testClient(REDIS_URL as string)
    try {
      const at = Math.round(await dbNowMs()) + 600_000
      const job = await cached.add(
        'k',
        {},
        { runAt: new Date(at), deduplication: { id: 'run-at-cached', ttl: 60_000 } },
      )
      const r = await row(job.id)
      expect(r.state).toBe('delayed')
      expect(r.run_at_ms - at).toBeGreaterThanOrEqual(0)
      expect(r.run_at_ms - at).toBeLessThanOrEqual(1)
    } finally {
      await cached.close()
      await deleteSchemaKeys(client, db.schema)
      client.disconnect()
    }
  })

  it('is honoured by add_job() and add_jobs(), which refuse it beside a delay', async () => {
    const s = `"${db.schema}"`
    const { rows } = await db.pool.query<{ state: string; due: boolean }>(
      `select (a.job).state, (a.job).run_at = now() + interval '1 hour' as due
       from ${s}.add_job('sql', 'x', run_at => now() + interval '1 hour') a`,
    )
    expect(rows[0]).toEqual({ state: 'delayed', due: true })
    const bulk = await db.pool.query<{ state: string; run_at_ms: number; now_ms: number }>(
      `select (a.job).state, (extract(epoch from (a.job).run_at) * 1000)::float8 as run_at_ms,
              (extract(epoch from now()) * 1000)::float8 as now_ms
       from ${s}.add_jobs('sql', jsonb_build_array(
         jsonb_build_object('name', 'n', 'runAt', (extract(epoch from now()) * 1000)::bigint + 60000),
         jsonb_build_object('name', 's', 'runAt', (now() + interval '2 minutes')::text),
         jsonb_build_object('name', 'p', 'runAt', '2001-01-01T00:00:00Z'))) a order by a.ordinal`,
    )
    expect(bulk.rows.map((r) => r.state)).toEqual(['delayed', 'delayed', 'waiting'])
    expect(bulk.rows[0]!.run_at_ms - bulk.rows[0]!.now_ms).toBeGreaterThanOrEqual(59_999)
    expect(bulk.rows[0]!.run_at_ms - bulk.rows[0]!.now_ms).toBeLessThanOrEqual(60_001)
    expect(bulk.rows[1]!.run_at_ms - bulk.rows[1]!.now_ms).toBe(120_000)
    const before = await jobCount()
    await expect(
      db.pool.query(`select ${s}.add_job('sql', 'x', delay_ms => 5, run_at => now())`),
    ).rejects.toMatchObject({ code: '22023' })
    await expect(
      db.pool.query(`select ${s}.add_jobs('sql', '[{"name":"x","delayMs":5,"runAt":0}]')`),
    ).rejects.toMatchObject({ code: '22023' })
    expect(await jobCount()).toBe(before)
  })
})

describe('runAt validation', () => {
  const bad: [string, unknown, ValidationError['code']][] = [
    ['a string that is no time', 'tomorrow', 'INVALID_TYPE'],
    ['an ISO string without an offset', '2030-01-01T09:00:00', 'INVALID_TYPE'],
    ['a date that does not exist', '2030-02-30T09:00:00Z', 'INVALID_TYPE'],
    ['an invalid Date', new Date('nope'), 'INVALID_TYPE'],
    ['NaN', Number.NaN, 'NOT_INTEGER'],
    ['a fraction of a ms', 1.5, 'NOT_INTEGER'],
    ['before 1970', -1, 'OUT_OF_RANGE'],
    ['after 9999', new Date('+010000-01-01T00:00:00Z'), 'OUT_OF_RANGE'],
    ['a boolean', true, 'INVALID_TYPE'],
  ]
  it.each(bad)('refuses %s before anything is written', async (_what, runAt, code) => {
    const before = await jobCount()
    await expect(queue.add('x', {}, { runAt: runAt as number })).rejects.toMatchObject({
      name: 'ValidationError',
      code,
      field: 'opts.runAt',
    })
    await expect(queue.addBulk([{ name: 'x', data: {}, opts: { runAt: runAt as number } }])).rejects.toMatchObject({
      code,
      field: 'items[0].opts.runAt',
    })
    expect(await jobCount()).toBe(before)
  })

  it('refuses delay and runAt together', async () => {
    const before = await jobCount()
    await expect(queue.add('x', {}, { delay: 10, runAt: Date.now() })).rejects.toMatchObject({
      code: 'CONFLICTING_OPTIONS',
      field: 'opts.runAt',
    })
    expect(await jobCount()).toBe(before)
  })
})
