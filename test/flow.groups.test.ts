// Groups (docs/flow-control.md#groups): adding jobs to a group (add, addBulk, add_job(), add_jobs()), the group limits
// as setLimits stores them, bad input, what the views say, every end of a run freeing its group's slot, ctx.rateLimit
// with scope 'group', and fairness between groups.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, ValidationError, Worker, runMaintenance } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'
import { prepared } from '../src/db/prepared.js'
import { HEAD } from '../src/worker/job-store.js'

let db: TestSchema
const queues: Queue[] = []
const workers: Worker[] = []
const queueOf = (name: string): Queue => {
  const q = new Queue(name, { connectionString: db.url, schema: db.schema, migrate: false })
  queues.push(q)
  return q
}
const workerOf = (name: string, handler: ConstructorParameters<typeof Worker>[1], extra = {}): Worker => {
  const w = new Worker(name, handler, {
    connectionString: db.url,
    schema: db.schema,
    pollIntervalMs: 100,
    concurrency: 4,
    migrate: false,
    ...extra,
  }).on('error', () => {})
  workers.push(w)
  return w
}
/** Waits for the handler's abort (cancel, lease lost, close). */
const hold = (_job: unknown, ctx: { signal: AbortSignal }) =>
  new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('ok')))

beforeAll(async () => {
  db = await freshSchema('flow_groups')
})
afterAll(async () => {
  await Promise.all(workers.map((w) => w.close()))
  await Promise.all(queues.map((q) => q.close()))
  await db.drop()
})

const groupOf = async (id: string): Promise<string | null> => (await storedJob(db, id)).group_id
const groupSlots = async (queue: string): Promise<number> => {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from "${db.schema}".limit_slots where queue = $1 and group_id <> '' and job_id is not null`,
    [queue],
  )
  return rows[0]!.n
}
const jobCount = async (queue: string): Promise<number> => {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from "${db.schema}".jobs where queue = $1`,
    [queue],
  )
  return rows[0]!.n
}

describe('adding jobs to a group', () => {
  it('add, addBulk (plain and not), add_job() and add_jobs() store the group; old call shapes still work', async () => {
    const q = queueOf('adds')
    expect(await groupOf((await q.add('a', {}, { group: { id: 'tenant-1' } })).id)).toBe('tenant-1')
    expect(await groupOf((await q.add('b', {}, { group: { id: 't2' }, jobId: 'custom-b' })).id)).toBe('t2')
    expect(await groupOf((await q.add('c', {})).id)).toBeNull()
    const plain = await q.addBulk([
      { name: 'p1', data: {}, opts: { group: { id: 'g1' } } },
      { name: 'p2', data: {} },
      { name: 'p3', data: {}, opts: { group: { id: 'g2' } } },
    ])
    expect(await Promise.all(plain.map((j) => groupOf(j.id)))).toEqual(['g1', null, 'g2'])
    const decided = await q.addBulk([
      { name: 'd1', data: {}, opts: { group: { id: 'g3' }, deduplication: { id: 'k1' } } },
      { name: 'd2', data: {}, opts: { jobId: 'custom-d2' } },
      { name: 'd3', data: {}, opts: { group: { id: 'g4' } } },
    ])
    expect(await Promise.all(decided.map((j) => groupOf(j.id)))).toEqual(['g3', null, 'g4'])
    // A duplicate keeps its owner's group.
    const dup = await q.add('d1', {}, { group: { id: 'other' }, deduplication: { id: 'k1' } })
    expect(dup.id).toBe(decided[0]!.id)
    expect(await groupOf(dup.id)).toBe('g3')

    const s = `"${db.schema}"`
    const one = await db.pool.query(
      `select (a.job).id::text as id from ${s}.add_job('adds', 'sql', group_id => 'sg') a`,
    )
    expect(await groupOf(one.rows[0].id)).toBe('sg')
    const old = await db.pool.query(`select (a.job).id::text as id from ${s}.add_job('adds', 'sql-old') a`)
    expect(await groupOf(old.rows[0].id)).toBeNull()
    const many = await db.pool.query(
      `select (a.job).id::text as id from ${s}.add_jobs('adds', $1::jsonb) a order by a.ordinal`,
      [JSON.stringify([{ name: 'x', groupId: 'sx' }, { name: 'y' }, { name: 'z', groupId: 'sz', jobId: 'custom-z' }])],
    )
    expect(await Promise.all(many.rows.map((r) => groupOf(r.id)))).toEqual(['sx', null, 'sz'])
    const before = await jobCount('adds')
    for (const bad of [
      `select ${s}.add_job('adds', 'bad', group_id => '')`,
      `select ${s}.add_job('adds', 'bad', group_id => repeat('x', 129))`,
      `select ${s}.add_jobs('adds', '[{"name": "ok"}, {"name": "bad", "groupId": 5}]')`,
      `select ${s}.add_jobs('adds', '[{"name": "bad", "groupId": ""}]')`,
    ]) {
      const err = await db.pool.query(bad).catch((e: unknown) => e)
      expect((err as { code?: string }).code, bad).toBe('22023')
    }
    expect(await jobCount('adds')).toBe(before)
  })

  it('refuses a bad group before any I/O, naming the field, and adds nothing', async () => {
    const q = queueOf('bad-groups')
    const cases: [unknown, string][] = [
      [{ id: '' }, 'opts.group.id'],
      [{ id: 'x'.repeat(129) }, 'opts.group.id'],
      [{ id: 5 }, 'opts.group.id'],
      [{}, 'opts.group.id'],
      [{ id: 'ok', weight: 2 }, 'opts.group.weight'],
      ['tenant', 'opts.group'],
      [null, 'opts.group'],
    ]
    for (const [group, field] of cases) {
      const err = await q.add('j', {}, { group } as never).catch((e: unknown) => e)
      expect(err, JSON.stringify(group)).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).field).toBe(field)
    }
    const bulk = await q
      .addBulk([
        { name: 'a', data: {}, opts: { group: { id: 'fine' } } },
        { name: 'b', data: {}, opts: { group: { id: '' } } },
      ])
      .catch((e: unknown) => e)
    expect((bulk as ValidationError).field).toBe('items[1].opts.group.id')
    // 128 characters (code points) is the bound.
    expect(await groupOf((await q.add('max', {}, { group: { id: '€'.repeat(128) } })).id)).toBe('€'.repeat(128))
    expect(await jobCount('bad-groups')).toBe(1)
  })
})

describe('group limits: setLimits / getLimits', () => {
  it('stores group limits, keeps what a call leaves out, clears with null; bad input changes nothing', async () => {
    const q = queueOf('group-settings')
    expect(await q.getLimits()).toEqual({ concurrency: null, rateLimit: null, slotsInUse: 0, group: null })
    await q.setLimits({ group: { concurrency: 1 } })
    expect(await q.getLimits()).toEqual({
      concurrency: null,
      rateLimit: null,
      slotsInUse: 0,
      group: { concurrency: 1, rateLimit: null, slotsInUse: 0 },
    })
    await q.setLimits({ concurrency: 5, group: { rateLimit: { max: 10, durationMs: 1000 } } })
    expect((await q.getLimits()).group).toEqual({
      concurrency: 1,
      rateLimit: { max: 10, durationMs: 1000 },
      slotsInUse: 0,
    })
    await q.setLimits({ group: { concurrency: null } })
    expect((await q.getLimits()).group).toMatchObject({ concurrency: null, rateLimit: { max: 10 } })
    const cases: [unknown, string][] = [
      [{ group: { concurrency: 0 } }, 'limits.group.concurrency'],
      [{ group: { concurrency: -1 } }, 'limits.group.concurrency'],
      [{ group: { concurrency: 1.5 } }, 'limits.group.concurrency'],
      [{ group: { concurrency: '1' } }, 'limits.group.concurrency'],
      [{ group: { rateLimit: { max: 0, durationMs: 10 } } }, 'limits.group.rateLimit.max'],
      [{ group: { rateLimit: { max: 1, durationMs: -1 } } }, 'limits.group.rateLimit.durationMs'],
      [{ group: { rateLimit: { max: 1, durationMs: 10, burst: 2 } } }, 'limits.group.rateLimit.burst'],
      [{ group: { concurency: 1 } }, 'limits.group.concurency'],
      [{ group: 1 }, 'limits.group'],
      [{ concurrency: 2, group: { concurrency: 0 } }, 'limits.group.concurrency'],
    ]
    for (const [limits, field] of cases) {
      const err = await q.setLimits(limits as never).catch((e: unknown) => e)
      expect(err, JSON.stringify(limits)).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).field).toBe(field)
    }
    expect(await q.getLimits()).toMatchObject({ concurrency: 5, group: { concurrency: null } })
    await q.setLimits({ group: null })
    expect(await q.getLimits()).toMatchObject({ concurrency: 5, group: null })
  })
})

describe('every end of a run frees its group slot', () => {
  it('fail, cancel and an operator DELETE free it; a completion frees its own; nothing stays held', async () => {
    const q = queueOf('group-ends')
    await q.setLimits({ group: { concurrency: 1 } })
    const w = workerOf('group-ends', async (job, ctx) => {
      if (job.name === 'fail') throw new Error('no')
      if (job.name !== 'last') await hold(job, ctx)
      return 'ok'
    })
    const g = { group: { id: 'g' } }
    const failing = await q.add('fail', {}, { ...g, attempts: 2 })
    expect(await waitForState(db, failing.id, 'failed', 15_000)).toMatchObject({ attempts: 2 })
    const cancelled = await q.add('cancel', {}, g)
    await waitForState(db, cancelled.id, 'active', 15_000)
    expect(await groupSlots('group-ends')).toBe(1)
    await q.cancelJob(cancelled.id)
    await waitForState(db, cancelled.id, 'cancelled', 15_000)
    const deleted = await q.add('delete', {}, g)
    await waitForState(db, deleted.id, 'active', 15_000)
    expect((await storedJob(db, deleted.id)).group_slot).toBe(1)
    await db.pool.query(`delete from "${db.schema}".jobs where id = $1`, [deleted.id])
    const last = await q.add('last', {}, g)
    const done = await waitForState(db, last.id, 'completed', 15_000)
    // A completion frees its group slot itself: the job keeps -slot.
    expect(done.group_slot).toBe(-1)
    await waitFor(async () => (await groupSlots('group-ends')) === 0, 5_000, 'every group slot to be free')
    await w.close()
  }, 60_000)

  it('with the group slot held, the group waits while another group runs; held_jobs says why', async () => {
    const q = queueOf('group-held')
    await q.setLimits({ group: { concurrency: 1 } })
    workerOf('group-held', hold)
    const a1 = await q.add('a1', {}, { group: { id: 'a' } })
    await waitForState(db, a1.id, 'active', 15_000)
    const a2 = await q.add('a2', {}, { group: { id: 'a' } })
    const b1 = await q.add('b1', {}, { group: { id: 'b' } })
    const free = await q.add('free', {})
    await waitForState(db, b1.id, 'active', 15_000)
    await waitForState(db, free.id, 'active', 15_000)
    const since = Date.now()
    await waitFor(() => Date.now() - since > 600, 2_000, 'a few polls')
    expect((await storedJob(db, a2.id)).state).toBe('waiting')
    const held = await db.pool.query(
      `select id::text, held_by from "${db.schema}".held_jobs where queue = 'group-held'`,
    )
    expect(held.rows).toEqual([{ id: a2.id, held_by: 'group concurrency' }])
    const view = await db.pool.query(
      `select group_concurrency, group_slots_in_use from "${db.schema}".queue_limits where queue = 'group-held'`,
    )
    expect(view.rows[0]).toEqual({ group_concurrency: 1, group_slots_in_use: 2 })
    await q.cancelJob(a1.id)
    await waitForState(db, a2.id, 'active', 15_000)
    for (const j of [a2, b1, free]) await q.cancelJob(j.id)
    await waitFor(async () => (await groupSlots('group-held')) === 0, 10_000, 'every group slot to be free')
  }, 60_000)

  it('held_jobs names a group rate and a group hold', async () => {
    const q = queueOf('group-reasons')
    await q.setLimits({ group: { rateLimit: { max: 1, durationMs: 600_000 } } })
    const w = workerOf('group-reasons', async () => 'ok')
    const first = await q.add('r1', {}, { group: { id: 'r' } })
    await waitForState(db, first.id, 'completed', 15_000)
    const second = await q.add('r2', {}, { group: { id: 'r' } })
    await w.close()
    await db.pool.query(
      `insert into "${db.schema}".limit_groups (queue, group_id, paused_until) values ('group-reasons', 'h', now() + interval '1 hour')`,
    )
    const third = await q.add('h1', {}, { group: { id: 'h' } })
    const held = await db.pool.query(
      `select id::text, held_by from "${db.schema}".held_jobs where queue = 'group-reasons' order by id`,
    )
    expect(held.rows).toEqual([
      { id: second.id, held_by: 'group rate' },
      { id: third.id, held_by: 'group ctx.rateLimit' },
    ])
  }, 30_000)
})

describe("ctx.rateLimit(ms, { scope: 'group' })", () => {
  it('refuses a job without a group with a ValidationError naming scope, and writes nothing', async () => {
    const q = queueOf('no-group-hold')
    let caught: unknown
    const w = workerOf('no-group-hold', async (_job, ctx) => {
      caught = await ctx.rateLimit(100, { scope: 'group' }).catch((e: unknown) => e)
      return 'ok'
    })
    const job = await q.add('j', {})
    await waitForState(db, job.id, 'completed', 15_000)
    expect(caught).toBeInstanceOf(ValidationError)
    expect((caught as ValidationError).field).toBe('options.scope')
    const { rows } = await db.pool.query(
      `select (select count(*) from "${db.schema}".limit_groups where queue = 'no-group-hold')::int as groups,
              (select count(*) from "${db.schema}".queue_settings where queue = 'no-group-hold')::int as settings`,
    )
    expect(rows[0]).toEqual({ groups: 0, settings: 0 })
    await w.close()
  }, 30_000)
})

describe('housekeeping prunes group limit rows that hold nothing', () => {
  it('free slots of groups without queued jobs, rate rows out of the window, ended holds; nothing in use', async () => {
    const q = queueOf('prune')
    await q.setLimits({ group: { concurrency: 2, rateLimit: { max: 3, durationMs: 60_000 } } })
    const waiting = await q.add('w', {}, { group: { id: 'waiting' } })
    const running = await q.add('r', {}, { group: { id: 'running' }, delay: 3_600_000 })
    const s = `"${db.schema}"`
    // What claims and holds leave behind: a drained group's free slot, a slot held by a run, a waiting group's free
    // slot; a rate row out of the window and one in it; an ended hold and a live one.
    await db.pool.query(
      `insert into ${s}.limit_slots (queue, group_id, slot, job_id, lock_token) values
         ('prune', 'done', 1, null, null), ('prune', 'waiting', 1, null, null),
         ('prune', 'running', 1, $1, gen_random_uuid())`,
      [running.id],
    )
    await db.pool.query(
      `insert into ${s}.limit_rate_slots (queue, group_id, slot, used_at) values
         ('prune', 'done', 1, now() - interval '2 minutes'), ('prune', 'done', 2, now() - interval '10 seconds');
       insert into ${s}.limit_groups (queue, group_id, paused_until) values
         ('prune', 'done', now() - interval '1 second'), ('prune', 'waiting', now() + interval '1 hour')`,
    )
    const r = await runMaintenance({ pool: db.pool, schema: db.schema })
    expect(r.prunedLimits).toBeGreaterThanOrEqual(3)
    const left = await db.pool.query<{ kind: string; group_id: string; slot: number | null }>(
      `select 'slot' as kind, group_id, slot from ${s}.limit_slots where queue = 'prune'
       union all select 'rate', group_id, slot from ${s}.limit_rate_slots where queue = 'prune'
       union all select 'hold', group_id, null from ${s}.limit_groups where queue = 'prune'
       order by 1, 2, 3`,
    )
    expect(left.rows).toEqual([
      { kind: 'hold', group_id: 'waiting', slot: null },
      { kind: 'rate', group_id: 'done', slot: 2 },
      { kind: 'slot', group_id: 'running', slot: 1 },
      { kind: 'slot', group_id: 'waiting', slot: 1 },
    ])
    // The held group still waits for its hold; a pruned group's next job gets its slot and rate row made again.
    await db.pool.query(`delete from ${s}.limit_groups where queue = 'prune'`)
    const next = await q.add('d', {}, { group: { id: 'done' } })
    const w = workerOf('prune', async () => 'ok')
    await waitForState(db, next.id, 'completed')
    await waitForState(db, waiting.id, 'completed')
    await w.close()
    // Its run took group slot 1 (negated: freed by its completion) and a rate row: made again by the claim's upsert.
    const { rows } = await db.pool.query<{ group_slot: number; rate_rows: number }>(
      `select j.group_slot, (select count(*) from ${s}.limit_rate_slots r
         where r.queue = 'prune' and r.group_id = 'done' and r.used_at >= j.started_at)::int as rate_rows
       from ${s}.jobs j where j.id = $1`,
      [next.id],
    )
    expect(rows[0]).toEqual({ group_slot: -1, rate_rows: 1 })
  }, 60_000)
})

describe('fairness between groups', () => {
  it("a group's backlog does not hold back another group's jobs added after it", async () => {
    const q = queueOf('fair')
    await q.setLimits({ group: { concurrency: 10 } })
    await q.addBulk(Array.from({ length: 200 }, (_, i) => ({ name: 'a', data: { i }, opts: { group: { id: 'A' } } })))
    await q.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'b', data: { i }, opts: { group: { id: 'B' } } })))
    const w = workerOf('fair', async () => new Promise((r) => setTimeout(() => r('ok'), 10)), { concurrency: 10 })
    await waitFor(async () => (await jobCount('fair')) > 0 && (await doneCount('fair')) === 205, 60_000, 'the drain')
    await w.close()
    const { rows } = await db.pool.query<{ group_id: string; last: Date; claims_before: number }>(
      `with s as (select group_id, started_at from "${db.schema}".jobs where queue = 'fair'),
            claims as (select distinct started_at from s)
       select s.group_id, max(s.started_at) as last,
              (select count(*) from claims c where c.started_at <= max(s.started_at))::int as claims_before
       from s group by s.group_id`,
    )
    const by = Object.fromEntries(rows.map((r) => [r.group_id, r]))
    expect(by.B!.last.getTime()).toBeLessThan(by.A!.last.getTime())
    // Every job of B started within the worker's first two claims (a claim's jobs share its now()).
    expect(by.B!.claims_before).toBeLessThanOrEqual(2)
  }, 90_000)

  it('serves the groups round robin in group id order, whatever order their jobs were added in', async () => {
    const q = queueOf('cycle')
    await q.setLimits({ group: { concurrency: 1 } })
    // Added d first and a last: the queue's order is d, c, b, a; the walk's is a, b, c, d.
    for (const g of ['d', 'c', 'b', 'a'])
      await q.addBulk(Array.from({ length: 3 }, (_, i) => ({ name: g, data: { i }, opts: { group: { id: g } } })))
    const started: string[] = []
    const w = workerOf('cycle', async (job) => void started.push(job.name), { concurrency: 1, batchSize: 1 })
    await waitFor(async () => (await doneCount('cycle')) === 12, 60_000, 'the drain')
    await w.close()
    // Each claim takes one job: every group once before any group twice, in the same order each round.
    expect(started).toEqual(['a', 'b', 'c', 'd', 'a', 'b', 'c', 'd', 'a', 'b', 'c', 'd'])
  }, 90_000)

  it('a claim reads as many groups as it can serve, not every group with queued jobs', async () => {
    const q = queueOf('wide')
    await q.setLimits({ group: { concurrency: 1 } })
    await q.addBulk(
      Array.from({ length: 2_000 }, (_, i) => ({ name: 'w', data: {}, opts: { group: { id: `g${i}` } } })),
    )
    const statement = prepared('claim-jobs-grouped', db.schema)
    const client = await db.pool.connect()
    try {
      await client.query('begin')
      const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `explain (analyze, format json) ${statement.text}`,
        ['wide', 5, 30_000, 'explain', '00000000-0000-0000-', HEAD.priority, HEAD.runAtUs, HEAD.id, null, ''],
      )
      const plan = rows[0]!['QUERY PLAN'][0].Plan
      // The walks' rows: the groups read. Without the early stop, all 2,000.
      const walked = nodes(plan)
        .filter((n) => n['Node Type'] === 'Recursive Union')
        .reduce((sum, n) => sum + (n['Actual Rows'] ?? 0), 0)
      const started = nodes(plan).find((n) => n.Operation === 'Update' && n['Relation Name'] === 'jobs')
      expect(started?.['Actual Rows']).toBe(5)
      expect(walked).toBeGreaterThanOrEqual(5)
      expect(walked).toBeLessThanOrEqual(6)
    } finally {
      await client.query('rollback')
      client.release()
    }
  }, 60_000)
})

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  Operation?: string
  'Actual Rows'?: number
  Plans?: PlanNode[]
}

function nodes(n: PlanNode): PlanNode[] {
  return [n, ...(n.Plans ?? []).flatMap(nodes)]
}

async function doneCount(queue: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from "${db.schema}".jobs where queue = $1 and state = 'completed'`,
    [queue],
  )
  return rows[0]!.n
}
