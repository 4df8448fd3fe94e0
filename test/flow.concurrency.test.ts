// Queue-wide concurrency (queue.setLimits): several worker processes never run more than N jobs of the queue at once
// (overlaps measured on the database clock), and every way a run ends gives its slot back.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, RetryLaterError, ValidationError, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { exited } from './helpers/processes.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'
import { createRuns, flowWorkers, maxOverlap, runCount, slotsInUse } from './helpers/flow.js'

let db: TestSchema
const queues: Queue[] = []
const queueOf = (name: string): Queue => {
  const q = new Queue(name, { connectionString: db.url, schema: db.schema, migrate: false })
  queues.push(q)
  return q
}

beforeAll(async () => {
  db = await freshSchema('flow_conc')
  await createRuns(db)
})
afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()))
  await db.drop()
})

describe('setLimits / getLimits', () => {
  it('stores limits in Postgres, keeps what a call leaves out, and clears with null', async () => {
    const q = queueOf('settings')
    expect(await q.getLimits()).toEqual({ concurrency: null, rateLimit: null, slotsInUse: 0, group: null })
    await q.setLimits({ concurrency: 3, rateLimit: { max: 10, durationMs: 1000 } })
    expect(await q.getLimits()).toEqual({
      concurrency: 3,
      rateLimit: { max: 10, durationMs: 1000 },
      slotsInUse: 0,
      group: null,
    })
    await q.setLimits({ concurrency: 5 })
    expect(await q.getLimits()).toMatchObject({ concurrency: 5, rateLimit: { max: 10, durationMs: 1000 } })
    const { rows } = await db.pool.query(
      `select count(*)::int as n from "${db.schema}".limit_slots where queue = 'settings'`,
    )
    expect(rows[0].n).toBe(5)
    await q.setLimits({ concurrency: 2 })
    const after = await db.pool.query(
      `select count(*)::int as n from "${db.schema}".limit_slots where queue = 'settings'`,
    )
    expect(after.rows[0].n).toBe(2)
    await q.setLimits({ rateLimit: null })
    expect(await q.getLimits()).toMatchObject({ concurrency: 2, rateLimit: null })
    await q.setLimits({ concurrency: null })
    expect(await q.getLimits()).toMatchObject({ concurrency: null, rateLimit: null })
  })

  it('rejects bad input with a ValidationError naming the field, and changes nothing', async () => {
    const q = queueOf('bad-input')
    await q.setLimits({ concurrency: 4 })
    const cases: [unknown, string][] = [
      [{ concurrency: 0 }, 'limits.concurrency'],
      [{ concurrency: -1 }, 'limits.concurrency'],
      [{ concurrency: 1.5 }, 'limits.concurrency'],
      [{ concurrency: '2' }, 'limits.concurrency'],
      [{ rateLimit: { max: 0, durationMs: 10 } }, 'limits.rateLimit.max'],
      [{ rateLimit: { max: 2, durationMs: 0.5 } }, 'limits.rateLimit.durationMs'],
      [{ rateLimit: { max: 2 } }, 'limits.rateLimit.durationMs'],
      [{ rateLimit: { max: 2, durationMs: 10, burst: 1 } }, 'limits.rateLimit.burst'],
      [{ rateLimit: 5 }, 'limits.rateLimit'],
      [{ concurency: 2 }, 'limits.concurency'],
      [undefined, 'limits'],
    ]
    for (const [limits, field] of cases) {
      const err = await q.setLimits(limits as never).catch((e: unknown) => e)
      expect(err, JSON.stringify(limits)).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).field).toBe(field)
    }
    expect(await q.getLimits()).toMatchObject({ concurrency: 4, rateLimit: null })
  })
})

describe('queue-wide concurrency across worker processes', () => {
  it('reaches N and never exceeds it; every slot is free after the drain', async () => {
    const q = queueOf('conc')
    await q.setLimits({ concurrency: 3 })
    await q.addBulk(Array.from({ length: 45 }, () => ({ name: 'j', data: { holdMs: 60 } })))
    const kids = flowWorkers(db, 'conc', 3, { CONCURRENCY: '6' })
    try {
      await waitFor(async () => (await runCount(db, 'conc')) >= 45, 50_000, 'the 45 jobs to run')
      expect(await maxOverlap(db, 'conc')).toBe(3)
      const pids = await db.pool.query(
        `select count(distinct pid)::int as n from "${db.schema}".runs r join "${db.schema}".jobs j on j.id = r.job_id where j.queue = 'conc'`,
      )
      expect(pids.rows[0].n).toBeGreaterThan(1)
      await waitFor(async () => (await slotsInUse(db, 'conc')) === 0, 10_000, 'the slots to be free')
    } finally {
      for (const k of kids) k.kill('SIGKILL')
    }
  }, 60_000)

  it('a worker already running when the limit is set obeys it at once', async () => {
    const q = queueOf('switch')
    const [kid] = flowWorkers(db, 'switch', 1, { CONCURRENCY: '8' })
    try {
      // The worker has claimed (and emptied) the queue without limits: it claims the plain way.
      await q.add('first', {})
      await waitFor(async () => (await runCount(db, 'switch')) === 1, 30_000, 'the first run')
      await q.setLimits({ concurrency: 1 })
      await q.addBulk(Array.from({ length: 8 }, () => ({ name: 'j', data: { holdMs: 80 } })))
      await waitFor(async () => (await runCount(db, 'switch')) === 9, 30_000, 'the 8 jobs to run')
      expect(await maxOverlap(db, 'switch')).toBe(1)
    } finally {
      kid!.kill('SIGKILL')
    }
  }, 60_000)

  it("a SIGKILLed worker's slot comes back after its lease, and only then", async () => {
    const q = queueOf('kill')
    await q.setLimits({ concurrency: 1 })
    const victim = await q.add('hang', { hang: true }, { attempts: 2 })
    const [kid] = flowWorkers(db, 'kill', 1, { LEASE_MS: '1500', MAINTENANCE_MS: '0' })
    let rescuer: Worker | undefined
    try {
      const held = await waitForState(db, victim.id, 'active', 30_000)
      await waitFor(async () => (await slotsInUse(db, 'kill')) === 1, 5_000, 'slot')
      kid!.kill('SIGKILL')
      expect(await exited(kid!)).toBe('SIGKILL')
      const next = await q.add('next', {})
      let nextStart: Date | undefined
      rescuer = new Worker(
        'kill',
        async (job) => {
          if (job.name === 'next') {
            nextStart = (await db.pool.query<{ now: Date }>('select clock_timestamp() as now')).rows[0]!.now
          }
          return 'ok'
        },
        {
          connectionString: db.url,
          schema: db.schema,
          leaseMs: 1500,
          maintenanceIntervalMs: 200,
          pollIntervalMs: 100,
          migrate: false,
        },
      )
      await waitForState(db, next.id, 'completed', 20_000)
      // The dead run held the only slot until its lease ran out.
      expect(nextStart!.getTime()).toBeGreaterThanOrEqual(held.locked_until!.getTime())
      await waitForState(db, victim.id, 'completed', 20_000)
      expect(await slotsInUse(db, 'kill')).toBe(0)
    } finally {
      kid!.kill('SIGKILL')
      await rescuer?.close()
    }
  }, 60_000)
})

describe('every end of a run frees its slot', () => {
  const worker = (name: string, handler: ConstructorParameters<typeof Worker>[1], extra = {}): Worker =>
    new Worker(name, handler, {
      connectionString: db.url,
      schema: db.schema,
      pollIntervalMs: 100,
      concurrency: 4,
      migrate: false,
      ...extra,
    }).on('error', () => {})

  it('fail, retry, cancel, give-back (retryLater), timeout and an operator DELETE', async () => {
    // One slot: each job below starts only if the run before it gave the slot back.
    const q = queueOf('ends')
    await q.setLimits({ concurrency: 1 })
    let gaveBack = false
    const w = worker('ends', async (job, ctx) => {
      if (job.name === 'fail') throw new Error('no')
      if (job.name === 'cancel' && !gaveBack) {
        gaveBack = true
        throw new RetryLaterError(0)
      }
      if (job.name !== 'last') await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))
      return 'ok'
    })
    try {
      const failing = await q.add('fail', {}, { attempts: 2 })
      expect(await waitForState(db, failing.id, 'failed', 15_000)).toMatchObject({ attempts: 2 })
      const cancelled = await q.add('cancel', {})
      expect(await waitForState(db, cancelled.id, 'active', 15_000)).toMatchObject({ attempts: 1 })
      expect(gaveBack).toBe(true)
      await q.cancelJob(cancelled.id)
      await waitForState(db, cancelled.id, 'cancelled', 15_000)
      const slow = await q.add('timeout', {}, { timeoutMs: 300 })
      await waitForState(db, slow.id, 'failed', 15_000)
      const deleted = await q.add('delete', {})
      await waitForState(db, deleted.id, 'active', 15_000)
      expect(await slotsInUse(db, 'ends')).toBe(1)
      await db.pool.query(`delete from "${db.schema}".jobs where id = $1`, [deleted.id])
      const last = await q.add('last', {})
      await waitForState(db, last.id, 'completed', 15_000)
      await waitFor(async () => (await slotsInUse(db, 'ends')) === 0, 5_000, 'the last slot to be free')
    } finally {
      await w.close()
    }
  }, 60_000)

  it('the limit holds: with the slot held, nothing else starts', async () => {
    const q = queueOf('held')
    await q.setLimits({ concurrency: 1 })
    const w = worker('held', async (_job, ctx) => {
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))
      return 'ok'
    })
    try {
      const first = await q.add('a', {})
      await waitForState(db, first.id, 'active', 15_000)
      const second = await q.add('b', {})
      // Several claims go by (poll 100 ms) while the first still runs; the second stays waiting.
      const since = Date.now()
      await waitFor(() => Date.now() - since > 800, 2_000, 'a few polls')
      expect((await storedJob(db, second.id)).state).toBe('waiting')
      await q.cancelJob(first.id)
      await waitForState(db, second.id, 'active', 15_000)
      await q.cancelJob(second.id)
      await waitForState(db, second.id, 'cancelled', 15_000)
    } finally {
      await w.close()
    }
  }, 30_000)

  it('each run holding a slot names it (jobs.limit_slot), the slot names the run; a run without a slot names none', async () => {
    const q = queueOf('pairs')
    await q.setLimits({ concurrency: 3 })
    const rated = queueOf('rate-only')
    await rated.setLimits({ rateLimit: { max: 100, durationMs: 1000 } })
    const hold = (_job: unknown, ctx: { signal: AbortSignal }) =>
      new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('ok')))
    const w = worker('pairs', hold)
    const r = worker('rate-only', hold)
    try {
      const jobs = await q.addBulk(Array.from({ length: 5 }, () => ({ name: 'j', data: {} })))
      const only = await rated.add('j', {})
      await waitForState(db, only.id, 'active', 15_000)
      await waitFor(async () => (await slotsInUse(db, 'pairs')) === 3, 15_000, 'the 3 slots to be taken')
      const { rows } = await db.pool.query<{ id: string; slot: number | null; held_by: string | null; same: boolean }>(
        `select j.id, j.limit_slot as slot, l.job_id::text as held_by, l.lock_token = j.lock_token as same
         from "${db.schema}".jobs j left join "${db.schema}".limit_slots l on l.queue = j.queue and l.slot = j.limit_slot
         where j.queue = 'pairs' and j.state = 'active' order by j.limit_slot`,
      )
      expect(rows.map((x) => x.slot)).toEqual([1, 2, 3])
      for (const x of rows) expect(x).toMatchObject({ held_by: x.id, same: true })
      expect((await storedJob(db, only.id)).limit_slot).toBeNull()
      // Cancelling one frees exactly its slot, which the next job takes.
      const first = rows[0]!.id
      await q.cancelJob(first)
      await waitFor(
        async () =>
          (await storedJob(db, jobs[3]!.id)).state === 'active' ||
          (await storedJob(db, jobs[4]!.id)).state === 'active',
        15_000,
        'a waiting job to take the freed slot',
      )
      expect(await slotsInUse(db, 'pairs')).toBe(3)
      await rated.cancelJob(only.id)
      for (const j of jobs) await q.cancelJob(j.id).catch(() => {})
      await waitFor(async () => (await slotsInUse(db, 'pairs')) === 0, 15_000, 'every slot to be free')
    } finally {
      await Promise.all([w.close(), r.close()])
    }
  }, 60_000)

  it('a completion frees its slot itself: the job keeps -slot, and the slot is free', async () => {
    const q = queueOf('completes')
    await q.setLimits({ concurrency: 1 })
    const w = worker('completes', async () => 'ok')
    try {
      const job = await q.add('j', {})
      const done = await waitForState(db, job.id, 'completed', 15_000)
      expect(done.limit_slot).toBe(-1)
      expect(await slotsInUse(db, 'completes')).toBe(0)
    } finally {
      await w.close()
    }
  }, 30_000)

  it('a stale token frees nothing: a slot is freed once, by the run that holds it', async () => {
    const q = queueOf('fence')
    await q.setLimits({ concurrency: 1 })
    const job = await q.add('j', {})
    await db.pool.query(
      `update "${db.schema}".limit_slots set job_id = $1, lock_token = '00000000-0000-0000-0000-000000000001' where queue = 'fence'`,
      [job.id],
    )
    // The job was never claimed with that token: its start and end (another token) leave that slot held.
    await db.pool.query(
      `update "${db.schema}".jobs set state = 'active', limit_slot = 1, lock_token = gen_random_uuid() where id = $1`,
      [job.id],
    )
    await db.pool.query(`update "${db.schema}".jobs set state = 'completed', finished_at = now() where id = $1`, [
      job.id,
    ])
    expect(await slotsInUse(db, 'fence')).toBe(1)
  })
})
