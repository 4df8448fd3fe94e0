// A worker held by a limit claims again when the limit allows, not at its next poll: a rate window that frees up, the
// end of a ctx.rateLimit hold (of the queue or of a group), a slot its own completion freed. Each worker polls every
// 10 s here, and the settle polls after an empty claim (25, 75, 175, 375, 775, 1575 ms ...) fall well after the
// moments asserted; times from the database clock.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema
const queues: Queue[] = []
const workers: Worker[] = []
const queueOf = (name: string): Queue => {
  const q = new Queue(name, { connectionString: db.url, schema: db.schema, migrate: false })
  queues.push(q)
  return q
}
const workerOf = (name: string, handler: ConstructorParameters<typeof Worker>[1], concurrency = 4): Worker => {
  // batchSize 1 with concurrency 1: no job claimed ahead, before a hold, to start after it.
  const w = new Worker(name, handler, {
    connectionString: db.url,
    schema: db.schema,
    migrate: false,
    concurrency,
    ...(concurrency === 1 ? { batchSize: 1 } : {}),
    pollIntervalMs: 10_000,
  })
  w.on('error', () => {})
  workers.push(w)
  return w
}

beforeAll(async () => {
  db = await freshSchema('flow_wake')
})
afterAll(async () => {
  await Promise.all(workers.map((w) => w.close()))
  await Promise.all(queues.map((q) => q.close()))
  await db.drop()
})

/** The queue's runs in start order: start and end, ms after the first start (database clock). */
async function runs(queue: string): Promise<{ start: number; end: number | null }[]> {
  const { rows } = await db.pool.query<{ start: string; end: string | null }>(
    `select extract(epoch from started_at - min(started_at) over ()) * 1000 as start,
            extract(epoch from finished_at - min(started_at) over ()) * 1000 as end
     from "${db.schema}".jobs where queue = $1 and started_at is not null order by started_at`,
    [queue],
  )
  return rows.map((r) => ({ start: Number(r.start), end: r.end === null ? null : Number(r.end) }))
}

async function completed(queue: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from "${db.schema}".jobs where queue = $1 and state = 'completed'`,
    [queue],
  )
  return rows[0]!.n
}

describe('a worker held by a limit wakes when the limit allows', () => {
  it('a full rate window: the next starts come when its oldest start leaves it', async () => {
    const q = queueOf('window')
    await q.setLimits({ rateLimit: { max: 3, durationMs: 1_000 } })
    await q.addBulk(Array.from({ length: 6 }, () => ({ name: 'j', data: {} })))
    workerOf('window', async () => 'ok')
    await waitFor(async () => (await completed('window')) === 6, 20_000, 'the 6 jobs')
    const r = await runs('window')
    // The window holds (the 4th start at least 1 s after the 1st) and the worker did not wait for a poll.
    expect(r[3]!.start).toBeGreaterThanOrEqual(1_000)
    expect(r[3]!.start).toBeLessThan(1_350)
  }, 30_000)

  it('a ctx.rateLimit hold of the queue: the next start comes at its end', async () => {
    const q = queueOf('hold')
    await q.addBulk(Array.from({ length: 2 }, (_, i) => ({ name: 'j', data: { i } })))
    let held = false
    workerOf(
      'hold',
      async (_job, ctx) => {
        if (held) return 'ok'
        held = true
        return ctx.rateLimit(1_000)
      },
      1,
    )
    await waitFor(async () => (await completed('hold')) === 2, 20_000, 'both jobs')
    const { rows } = await db.pool.query<{ after: string }>(
      `select extract(epoch from min(j.started_at) - s.rate_paused_until) * 1000 as after
       from "${db.schema}".jobs j, "${db.schema}".queue_settings s
       where j.queue = 'hold' and s.queue = 'hold' group by s.rate_paused_until`,
    )
    // The runs that completed started after the hold (none before its end), within 300 ms of its end.
    const after = Number(rows[0]!.after)
    expect(after).toBeGreaterThanOrEqual(0)
    expect(after).toBeLessThan(300)
  }, 30_000)

  it("a group's ctx.rateLimit hold: its next start comes at its end", async () => {
    const q = queueOf('group-hold')
    await q.setLimits({ group: { concurrency: 5 } })
    await q.addBulk(Array.from({ length: 2 }, (_, i) => ({ name: 'j', data: { i }, opts: { group: { id: 'g' } } })))
    let held = false
    workerOf(
      'group-hold',
      async (_job, ctx) => {
        if (held) return 'ok'
        held = true
        return ctx.rateLimit(1_000, { scope: 'group' })
      },
      1,
    )
    await waitFor(async () => (await completed('group-hold')) === 2, 20_000, 'both jobs')
    const { rows } = await db.pool.query<{ after: string }>(
      `select extract(epoch from min(j.started_at) - g.paused_until) * 1000 as after
       from "${db.schema}".jobs j, "${db.schema}".limit_groups g
       where j.queue = 'group-hold' and j.state = 'completed' and g.queue = 'group-hold' group by g.paused_until`,
    )
    const after = Number(rows[0]!.after)
    expect(after).toBeGreaterThanOrEqual(0)
    expect(after).toBeLessThan(300)
  }, 30_000)

  it('a concurrency slot its own completion freed: the next job starts then', async () => {
    const q = queueOf('slots')
    await q.setLimits({ concurrency: 2 })
    await q.addBulk(Array.from({ length: 4 }, () => ({ name: 'j', data: {} })))
    workerOf('slots', async () => new Promise((r) => setTimeout(() => r('ok'), 1_100)))
    await waitFor(async () => (await completed('slots')) === 4, 20_000, 'the 4 jobs')
    const r = await runs('slots')
    const firstEnd = Math.min(r[0]!.end!, r[1]!.end!)
    expect(r[2]!.start).toBeGreaterThanOrEqual(firstEnd)
    expect(r[2]!.start - firstEnd).toBeLessThan(300)
  }, 30_000)
})
