// add_job() hands a job straight to a live idle worker (migration 000003): who gets one, what the NOTIFY carries, and
// when it must not happen. Every test runs through both ways an add reaches it: a queue.add with a jobId (add-job.sql)
// and a plain queue.add (add-plain-job.sql, which calls add_job() once it found the queue idle).
// A test connection plays the worker: it LISTENs, holds the sign-up's advisory lock, and signs up in idle_workers by hand.

import { randomUUID } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { type Job, Queue } from '../src/index.js'
import { type TestSchema, freshSchema } from './support/schema.js'
import { storedJob, waitFor } from './fixtures/worker-helpers.js'

let db: TestSchema
let fake: pg.Client
let queue: Queue
let queueName = ''
const payloads: string[] = []
const ALIVE_KEY = '7351234567890123'
const DEAD_KEY = '7351234567890124'

beforeAll(async () => {
  db = await freshSchema('sql_handoff')
  fake = new pg.Client({ connectionString: db.url })
  await fake.connect()
  fake.on('notification', (msg) => payloads.push(msg.payload ?? ''))
  await fake.query(`listen "pgonce:${db.schema}"`)
  await fake.query('select pg_advisory_lock($1::bigint)', [ALIVE_KEY])
})
afterAll(async () => {
  await queue?.close()
  await fake.end()
  await db.drop()
})

let n = 0
beforeEach(async () => {
  await settle()
  payloads.length = 0
  await queue?.close()
  queueName = `handoff-${++n}`
  queue = new Queue(queueName, { connectionString: db.url, schema: db.schema, migrate: false })
})

async function signUp(worker: string, aliveKey: string, ttlMs = 60_000): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into "${db.schema}".idle_workers (queue, worker_id, alive_key, lease_ms, expires_at)
     values ($1, $2, $3, 45000, now() + make_interval(secs => $4::bigint / 1000.0)) returning id`,
    [queueName, worker, aliveKey, ttlMs])
  return rows[0]!.id
}

async function signUps(): Promise<{ worker_id: string }[]> {
  const { rows } = await db.pool.query<{ worker_id: string }>(
    `select worker_id from "${db.schema}".idle_workers where queue = $1 order by id`, [queueName])
  return rows
}

/** Gives a NOTIFY sent by the last commit time to arrive. */
const settle = async (): Promise<void> => {
  await fake.query('select 1')
  await new Promise((r) => setTimeout(r, 50))
}

type Add = (q: Queue, name: string, data: unknown, opts?: Record<string, unknown>) => Promise<Job>
const VIA: [string, Add][] = [
  ['a plain queue.add', (q, name, data, opts) => q.add(name, data, opts)],
  ['a queue.add with a jobId', (q, name, data, opts) => q.add(name, data, { ...opts, jobId: `${name}-${randomUUID()}` })],
]

describe.each(VIA)('hand-off to an idle worker through %s', (_via, add) => {
  it('inserts the job active for the oldest live sign-up, consumes it, and NOTIFYs the job as the claim returns it', async () => {
    await signUp('w-old', ALIVE_KEY)
    await signUp('w-new', ALIVE_KEY)
    const job = await add(queue, 'mail', { to: 'a@example.com', n: 1.5 }, { attempts: 3, priority: 2, backoff: { type: 'fixed', delay: 10 } })
    expect(job.state).toBe('active')
    const row = await storedJob(db, job.id)
    expect(row).toMatchObject({ state: 'active', attempts: 1, locked_by: 'w-old' })
    expect(row.lock_token).toMatch(/^[0-9a-f-]{36}$/)
    const { rows: [lease] } = await db.pool.query<{ ms: number }>(
      `select (extract(epoch from locked_until - started_at) * 1000)::float8 as ms from "${db.schema}".jobs where id = $1`, [job.id])
    expect(lease!.ms).toBeGreaterThanOrEqual(45_000)
    expect(lease!.ms).toBeLessThan(46_000)
    expect(await signUps()).toEqual([{ worker_id: 'w-new' }])

    await settle()
    const handoffs = payloads.filter((p) => p.startsWith('handoff '))
    expect(handoffs).toHaveLength(1)
    expect(payloads).not.toContain(queueName)
    const prefix = 'handoff w-old '
    expect(handoffs[0]!.startsWith(prefix)).toBe(true)
    const sent = JSON.parse(handoffs[0]!.slice(prefix.length)) as Record<string, unknown>
    expect(sent).toMatchObject({
      id: job.id, queue: queueName, name: 'mail', job_id: job.jobId, data: { to: 'a@example.com', n: 1.5 },
      priority: 2, attempts: 1, max_attempts: 3, backoff: { type: 'fixed', delay: 10 }, dedup_key: null,
      lock_token: row.lock_token, last_error: null, error_stack: null,
    })
    expect(Math.floor(sent.run_at_ms as number)).toBe(row.run_at.getTime())
  })

  it('hands nothing to a sign-up whose advisory lock nobody holds (its worker is gone): deletes it and wakes the queue instead', async () => {
    await signUp('w-dead', DEAD_KEY)
    await signUp('w-live', ALIVE_KEY)
    const job = await add(queue, 'x', {})
    expect((await storedJob(db, job.id)).locked_by).toBe('w-live')
    expect(await signUps()).toEqual([])

    await signUp('w-dead-2', DEAD_KEY)
    const next = await add(queue, 'y', {})
    expect(next.state).toBe('waiting')
    expect(await signUps()).toEqual([])
    await settle()
    expect(payloads).toContain(queueName)
  })

  it('hands nothing over when a due job is already waiting, nor for a delayed job, a keyed job, or through an expired sign-up', async () => {
    await signUp('w-expired', ALIVE_KEY, -1_000)
    const first = await add(queue, 'first', {})
    expect(first.state).toBe('waiting')
    await signUp('w', ALIVE_KEY)
    expect((await add(queue, 'second', {})).state).toBe('waiting')
    expect((await add(queue, 'later', {}, { delay: 60_000 })).state).toBe('delayed')
    const { rows } = await db.pool.query<{ state: string }>(`select state from "${db.schema}".jobs where queue = $1`, [queueName])
    expect(rows.map((r) => r.state).sort()).toEqual(['delayed', 'waiting', 'waiting'])
    expect(await signUps()).toEqual([{ worker_id: 'w-expired' }, { worker_id: 'w' }])

    // A queue with nothing due: a keyed add still goes the claim way (its key may be taken back by a replace).
    const keyed = new Queue(`${queueName}-k`, { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      await db.pool.query(`update "${db.schema}".idle_workers set queue = $1 where queue = $2 and worker_id = 'w'`, [`${queueName}-k`, queueName])
      const job = await keyed.add('k', {}, { deduplication: { id: 'key-1' } })
      expect(job.state).toBe('waiting')
      const { rows: left } = await db.pool.query(`select 1 from "${db.schema}".idle_workers where queue = $1`, [`${queueName}-k`])
      expect(left).toHaveLength(1)
    } finally {
      await keyed.close()
    }
  })

  it('inside a caller transaction that rolls back: no job, the sign-up is still there, and no NOTIFY', async () => {
    await signUp('w', ALIVE_KEY)
    const client = await db.pool.connect()
    try {
      await client.query('begin')
      const job = await add(queue, 'x', {}, { tx: client })
      expect(job.state).toBe('active')
      await client.query('rollback')
    } finally {
      client.release()
    }
    await settle()
    expect(payloads).toEqual([])
    expect(await signUps()).toEqual([{ worker_id: 'w' }])
    const { rows } = await db.pool.query(`select 1 from "${db.schema}".jobs where queue = $1`, [queueName])
    expect(rows).toHaveLength(0)
  })

  it('two concurrent adds never share a sign-up: one each, the rest wait', async () => {
    await signUp('w-1', ALIVE_KEY)
    await signUp('w-2', ALIVE_KEY)
    const queues = Array.from({ length: 6 }, () => new Queue(queueName, { connectionString: db.url, schema: db.schema, migrate: false }))
    try {
      const jobs = await Promise.all(queues.map((q, i) => add(q, 'c', { i })))
      const { rows } = await db.pool.query<{ locked_by: string | null }>(
        `select locked_by from "${db.schema}".jobs where id = any($1::bigint[])`, [jobs.map((j) => j.id)])
      const owners = rows.map((r) => r.locked_by).filter((w) => w !== null).sort()
      expect(owners.length).toBeGreaterThanOrEqual(1)
      expect(owners.length).toBeLessThanOrEqual(2)
      expect(new Set(owners).size).toBe(owners.length)
      expect(await signUps()).toHaveLength(2 - owners.length)
    } finally {
      await Promise.all(queues.map((q) => q.close()))
    }
  })

  it('addBulk: a jobId item handed over comes back as stored (active, attempt counted); the next one waits', async () => {
    await signUp('w', ALIVE_KEY)
    const [first, second] = await queue.addBulk([
      { name: 'k', data: {}, opts: { jobId: `bulk-1-${queueName}` } },
      { name: 'k', data: {}, opts: { jobId: `bulk-2-${queueName}` } },
    ])
    expect(await storedJob(db, first!.id)).toMatchObject({ state: 'active', attempts: 1, locked_by: 'w' })
    expect(first).toMatchObject({ state: 'active', attempts: 1 })
    expect(first!.data).toEqual({})
    expect(second).toMatchObject({ state: 'waiting', attempts: 0 })
  })

  it('a job too large for a NOTIFY payload is announced by id and lock token only', async () => {
    await signUp('w', ALIVE_KEY)
    const big = { text: 'x'.repeat(10_000) }
    const job = await add(queue, 'big', big)
    await settle()
    // The payloads of this job only: a NOTIFY of the previous test may arrive late.
    const mine = () => payloads.filter((p) => p.startsWith('handoff w '))
      .map((p) => JSON.parse(p.slice('handoff w '.length)) as Record<string, unknown>)
      .find((sent) => sent.id === job.id)
    const sent = await waitFor(mine, 2_000, 'the hand-off NOTIFY')
    expect(sent).toEqual({ id: job.id, lock_token: (await storedJob(db, job.id)).lock_token })
  })
})
