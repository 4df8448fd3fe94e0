// Group limits across worker processes (docs/flow-control.md#groups): a group's concurrency is reached and never
// exceeded, its rate window holds (both measured on the database clock), a SIGKILLed worker's group slot comes back
// after its lease, and ctx.rateLimit with scope 'group' holds that group only.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { exited } from './helpers/processes.js'
import { waitForState } from './helpers/jobs.js'
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
  db = await freshSchema('flow_groups_proc')
  await createRuns(db)
})
afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()))
  await db.drop()
})

const groupSlots = async (queue: string): Promise<number> => {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from "${db.schema}".limit_slots where queue = $1 and group_id <> '' and job_id is not null`,
    [queue],
  )
  return rows[0]!.n
}

/** Jobs of `group` spread over the groups' ids, each recording its group in <schema>.runs. */
const grouped = (groups: string[], perGroup: number, data: Record<string, unknown> = {}) =>
  groups.flatMap((g) =>
    Array.from({ length: perGroup }, () => ({ name: 'j', data: { ...data, group: g }, opts: { group: { id: g } } })),
  )

/** The most starts of one group of `queue` (jobs.started_at) in any interval of `ms` that begins at one of them. */
async function maxGroupStartsInWindow(queue: string, group: string, ms: number): Promise<number> {
  const { rows } = await db.pool.query<{ max: number }>(
    `with s as (select started_at from "${db.schema}".jobs
                where queue = $1 and group_id = $2 and started_at is not null)
     select coalesce(max((select count(*) from s o where o.started_at >= a.started_at
                           and o.started_at < a.started_at + make_interval(secs => $3 / 1000.0))), 0)::int as max
     from s a`,
    [queue, group, ms],
  )
  return rows[0]!.max
}

describe('group concurrency across worker processes', () => {
  it('reaches the group limit and never exceeds it in any group; the queue runs more than one group at once', async () => {
    const q = queueOf('gconc')
    await q.setLimits({ group: { concurrency: 2 } })
    const groups = ['a', 'b', 'c', 'd']
    await q.addBulk(grouped(groups, 12, { holdMs: 60 }))
    const kids = flowWorkers(db, 'gconc', 3, { CONCURRENCY: '6' })
    try {
      await waitFor(async () => (await runCount(db, 'gconc')) >= 48, 60_000, 'the 48 jobs to run')
      for (const g of groups) expect(await maxOverlap(db, 'gconc', g), `group ${g}`).toBe(2)
      expect(await maxOverlap(db, 'gconc')).toBeGreaterThan(2)
      const pids = await db.pool.query(
        `select count(distinct pid)::int as n from "${db.schema}".runs r join "${db.schema}".jobs j on j.id = r.job_id where j.queue = 'gconc'`,
      )
      expect(pids.rows[0].n).toBeGreaterThan(1)
      await waitFor(async () => (await groupSlots('gconc')) === 0, 10_000, 'every group slot to be free')
    } finally {
      for (const k of kids) k.kill('SIGKILL')
    }
  }, 90_000)

  it('a worker already claiming under queue-wide limits obeys a group limit set later at once', async () => {
    const q = queueOf('gswitch')
    await q.setLimits({ concurrency: 8 })
    const [kid] = flowWorkers(db, 'gswitch', 1, { CONCURRENCY: '8' })
    try {
      // The worker has claimed (and emptied) the queue with the queue-wide limited statement.
      await q.add('first', {})
      await waitFor(async () => (await runCount(db, 'gswitch')) === 1, 30_000, 'the first run')
      await q.setLimits({ group: { concurrency: 1 } })
      await q.addBulk(grouped(['s'], 8, { holdMs: 80 }))
      await waitFor(async () => (await runCount(db, 'gswitch')) === 9, 30_000, 'the 8 jobs to run')
      expect(await maxOverlap(db, 'gswitch', 's')).toBe(1)
    } finally {
      kid!.kill('SIGKILL')
    }
  }, 60_000)

  it("a SIGKILLed worker's group slot comes back after its lease, and only then", async () => {
    const q = queueOf('gkill')
    await q.setLimits({ group: { concurrency: 1 } })
    const victim = await q.add('hang', { hang: true, group: 'g' }, { attempts: 2, group: { id: 'g' } })
    const [kid] = flowWorkers(db, 'gkill', 1, { LEASE_MS: '1500', MAINTENANCE_MS: '0' })
    let rescuer: Worker | undefined
    try {
      const held = await waitForState(db, victim.id, 'active', 30_000)
      expect(held.group_slot).toBe(1)
      kid!.kill('SIGKILL')
      expect(await exited(kid!)).toBe('SIGKILL')
      const next = await q.add('next', { group: 'g' }, { group: { id: 'g' } })
      const other = await q.add('other', { group: 'h' }, { group: { id: 'h' } })
      rescuer = new Worker('gkill', async () => 'ok', {
        connectionString: db.url,
        schema: db.schema,
        leaseMs: 1500,
        maintenanceIntervalMs: 200,
        pollIntervalMs: 100,
        migrate: false,
      }).on('error', () => {})
      const nextDone = await waitForState(db, next.id, 'completed', 20_000)
      // The dead run held its group's only slot until its lease ran out; another group did not wait for it.
      expect(nextDone.started_at!.getTime()).toBeGreaterThanOrEqual(held.locked_until!.getTime())
      const otherDone = await waitForState(db, other.id, 'completed', 20_000)
      expect(otherDone.group_slot).toBe(-1)
      await waitForState(db, victim.id, 'completed', 20_000)
      expect(await groupSlots('gkill')).toBe(0)
    } finally {
      kid!.kill('SIGKILL')
      await rescuer?.close()
    }
  }, 60_000)
})

describe('group rate limit across worker processes', () => {
  it('no interval of durationMs holds more than max starts of one group; the limit is reached', async () => {
    const q = queueOf('grate')
    await q.setLimits({ group: { rateLimit: { max: 3, durationMs: 400 } } })
    await q.addBulk(grouped(['x', 'y'], 12))
    const kids = flowWorkers(db, 'grate', 2, { CONCURRENCY: '8', POLL_MS: '50' })
    try {
      await waitFor(async () => (await runCount(db, 'grate')) >= 24, 60_000, 'the 24 jobs to run')
      for (const g of ['x', 'y']) expect(await maxGroupStartsInWindow('grate', g, 400), `group ${g}`).toBe(3)
      // 12 starts of a group at 3 per 400 ms take at least 4 windows: its first start to its last, at least 1.2 s.
      const { rows } = await db.pool.query(
        `select group_id, extract(epoch from max(started_at) - min(started_at)) * 1000 as span
         from "${db.schema}".jobs where queue = 'grate' group by group_id`,
      )
      for (const r of rows) expect(Number(r.span), r.group_id).toBeGreaterThanOrEqual(1_200)
    } finally {
      for (const k of kids) k.kill('SIGKILL')
    }
  }, 90_000)
})

describe("ctx.rateLimit(ms, { scope: 'group' }) across worker processes", () => {
  it('gives the job back without an attempt; its group starts nothing for ms, other groups go on', async () => {
    const q = queueOf('ghold')
    await q.setLimits({ group: { concurrency: 10 } })
    const kids = flowWorkers(db, 'ghold', 2, { POLL_MS: '100' })
    try {
      const limited = await q.add(
        'limited',
        { rateLimitMs: 4_000, rateLimitScope: 'group', group: 'x' },
        { group: { id: 'x' } },
      )
      const until = await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ until: Date | null }>(
            `select paused_until as until from "${db.schema}".limit_groups where queue = 'ghold' and group_id = 'x'`,
          )
          return rows[0]?.until ?? undefined
        },
        30_000,
        'ctx.rateLimit to hold group x',
      )
      const xs = await q.addBulk(grouped(['x'], 3))
      const ys = await q.addBulk(grouped(['y'], 3))
      const firstY = await waitForState(db, ys[0]!.id, 'completed', 20_000)
      for (const y of ys) await waitForState(db, y.id, 'completed', 20_000)
      // Group y went on during x's hold (its first job ran before the hold ended).
      expect(firstY.started_at!.getTime()).toBeLessThan(until.getTime())
      for (const x of xs) {
        const done = await waitForState(db, x.id, 'completed', 30_000)
        expect(done.started_at!.getTime()).toBeGreaterThanOrEqual(until.getTime())
      }
      const back = await waitForState(db, limited.id, 'completed', 30_000)
      // Two runs, one attempt counted: the rate-limited run was given back.
      expect(back.attempts).toBe(1)
      expect(back.started_at!.getTime()).toBeGreaterThanOrEqual(until.getTime())
      const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".runs where job_id = $1`, [
        limited.id,
      ])
      expect(rows[0].n).toBe(2)
      // The queue itself was never held.
      const s = await db.pool.query(`select rate_paused_until from "${db.schema}".queue_settings where queue = 'ghold'`)
      expect(s.rows[0].rate_paused_until).toBeNull()
    } finally {
      for (const k of kids) k.kill('SIGKILL')
    }
  }, 90_000)
})
