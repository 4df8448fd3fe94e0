// Rate limits across worker processes: queue.setLimits({ rateLimit }) as a sliding window (no interval of durationMs
// holds more than max starts, measured on the database clock), and ctx.rateLimit(ms) from a handler.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, ValidationError } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'
import { createRuns, flowWorkers, maxOverlap, runCount } from './helpers/flow.js'

let db: TestSchema
const queues: Queue[] = []
const queueOf = (name: string): Queue => {
  const q = new Queue(name, { connectionString: db.url, schema: db.schema, migrate: false })
  queues.push(q)
  return q
}

beforeAll(async () => {
  db = await freshSchema('flow_rate')
  await createRuns(db)
})
afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()))
  await db.drop()
})

/** The most starts of `queue` (jobs.started_at, the claim's database time) in any interval of `ms` that begins at one. */
async function maxStartsInWindow(queue: string, ms: number): Promise<number> {
  const { rows } = await db.pool.query<{ max: number }>(
    `with s as (select started_at from "${db.schema}".jobs where queue = $1 and started_at is not null)
     select coalesce(max((select count(*) from s o where o.started_at >= a.started_at
                           and o.started_at < a.started_at + make_interval(secs => $2 / 1000.0))), 0)::int as max
     from s a`,
    [queue, ms],
  )
  return rows[0]!.max
}

describe('queue-wide rate limit (sliding window) across worker processes', () => {
  it('no interval of durationMs holds more than max starts, under load; the limit is reached', async () => {
    const q = queueOf('rate')
    await q.setLimits({ rateLimit: { max: 4, durationMs: 400 } })
    await q.addBulk(Array.from({ length: 40 }, () => ({ name: 'j', data: {} })))
    const kids = flowWorkers(db, 'rate', 3, { CONCURRENCY: '8', POLL_MS: '50' })
    try {
      await waitFor(async () => (await runCount(db, 'rate')) >= 40, 50_000, 'the 40 jobs to run')
      expect(await maxStartsInWindow('rate', 400)).toBe(4)
      // 40 starts at 4 per 400 ms take at least 9 windows: the first start to the last is at least 3.6 s.
      const { rows } = await db.pool.query(
        `select extract(epoch from max(started_at) - min(started_at)) * 1000 as span from "${db.schema}".jobs where queue = 'rate'`,
      )
      expect(Number(rows[0].span)).toBeGreaterThanOrEqual(3_600)
    } finally {
      for (const k of kids) k.kill('SIGKILL')
    }
  }, 60_000)

  it('with a concurrency limit too, both hold', async () => {
    const q = queueOf('both')
    await q.setLimits({ concurrency: 2, rateLimit: { max: 5, durationMs: 500 } })
    await q.addBulk(Array.from({ length: 25 }, () => ({ name: 'j', data: { holdMs: 150 } })))
    const kids = flowWorkers(db, 'both', 2, { CONCURRENCY: '8', POLL_MS: '50' })
    try {
      await waitFor(async () => (await runCount(db, 'both')) >= 25, 50_000, 'the 25 jobs to run')
      expect(await maxStartsInWindow('both', 500)).toBeLessThanOrEqual(5)
      expect(await maxOverlap(db, 'both')).toBeLessThanOrEqual(2)
    } finally {
      for (const k of kids) k.kill('SIGKILL')
    }
  }, 60_000)
})

describe('ctx.rateLimit(ms)', () => {
  it('gives the job back without an attempt, and no job of the queue starts for ms, on any worker', async () => {
    const q = queueOf('hold')
    const kids = flowWorkers(db, 'hold', 2, { POLL_MS: '100' })
    try {
      const limited = await q.add('limited', { rateLimitMs: 1_500 })
      const until = await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ until: Date | null }>(
            `select rate_paused_until as until from "${db.schema}".queue_settings where queue = 'hold'`,
          )
          return rows[0]?.until ?? undefined
        },
        30_000,
        'ctx.rateLimit to hold the queue',
      )
      const others = await q.addBulk(Array.from({ length: 6 }, () => ({ name: 'other', data: {} })))
      for (const o of others) {
        const done = await waitForState(db, o.id, 'completed', 20_000)
        expect(done.started_at!.getTime()).toBeGreaterThanOrEqual(until.getTime())
      }
      const back = await waitForState(db, limited.id, 'completed', 20_000)
      // Two runs, one attempt counted: the rate-limited run was given back.
      expect(back.attempts).toBe(1)
      expect(back.started_at!.getTime()).toBeGreaterThanOrEqual(until.getTime())
      const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".runs where job_id = $1`, [
        limited.id,
      ])
      expect(rows[0].n).toBe(2)
      expect((await storedJob(db, limited.id)).state).toBe('completed')
    } finally {
      for (const k of kids) k.kill('SIGKILL')
    }
  }, 60_000)

  it('rejects a bad ms or scope before writing anything', async () => {
    const { checkRateLimitCall } = await import('../src/worker/rate-limit.js')
    for (const [ms, opts, field] of [
      [0, undefined, 'ms'],
      [1.5, undefined, 'ms'],
      [-5, undefined, 'ms'],
      [100, { scope: 'nope' }, 'options.scope'],
      [100, { scop: 'queue' }, 'options.scop'],
    ] as const) {
      let err: unknown
      try {
        checkRateLimitCall(ms, opts)
      } catch (e) {
        err = e
      }
      expect(err).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).field).toBe(field)
    }
  })
})
