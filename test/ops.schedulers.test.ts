// Job schedulers: one job per tick however many worker processes tick; missed ticks are not replayed; cron patterns and
// time zones are checked before any I/O; the schedule lives in Postgres.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { sqlFor } from '../src/db/sql-files.js'
import { exited, spawnFixture } from './helpers/processes.js'
import { waitFor } from './helpers/wait.js'
import { recordingPool } from './helpers/recording-pool.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('ops_schedulers')
  await db.pool.query(`create table "${db.schema}".handled (job_id bigint, pid int, attempt int)`)
})
afterAll(async () => {
  await db.drop()
})

const queueOf = (name: string) => new Queue(name, { connectionString: db.url, schema: db.schema, migrate: false })

describe('job schedulers', () => {
  it('a worker whose queue has no scheduler looks for ticks once per poll, not every few milliseconds', async () => {
    // greatest(0, null) is 0 in PostgreSQL: the next-tick query answered 0 ms for no scheduler at all, and every
    // worker ran two scheduler statements every 5 ms (a third of a busy worker's statements in the drain benchmark).
    let looks = 0
    const nextTick = sqlFor('next-scheduler-tick', db.schema)
    const pool = recordingPool(db, 4, (text) => {
      if (text === nextTick) looks++
    })
    const worker = new Worker('sched-none', async () => {}, {
      pool,
      schema: db.schema,
      pollIntervalMs: 1_000,
      maintenanceIntervalMs: 0,
      migrate: false,
    })
    try {
      await worker.run()
      // A window of time on purpose: the looks are counted per poll interval.
      await new Promise((r) => setTimeout(r, 1_500))
      expect(looks).toBeGreaterThanOrEqual(1)
      expect(looks).toBeLessThanOrEqual(3)
    } finally {
      await worker.close()
      await pool.end()
    }
  })

  it('3 worker processes ticking a schedule every second for 10 s add exactly one job per tick', async () => {
    const q = queueOf('sched-multi')
    const children = [0, 1, 2].map(() =>
      spawnFixture('worker-child.ts', {
        PGONCE_URL: db.url,
        PGONCE_SCHEMA: db.schema,
        QUEUE: 'sched-multi',
        CONCURRENCY: '2',
        POLL_MS: '300',
      }),
    )
    try {
      for (const c of children) await waitFor(() => c.output().includes('ready'), 20_000, 'a worker child to start')
      await q.upsertJobScheduler('every-second', { every: 1_000 }, { name: 'tick', data: { from: 'scheduler' } })
      // A window of time on purpose: one job per second of it.
      await new Promise((r) => setTimeout(r, 10_500))
      await q.removeJobScheduler('every-second')
      const { rows } = await db.pool.query<{ job_id: string; n: number }>(
        `select job_id, count(*)::int as n from "${db.schema}".jobs where queue = 'sched-multi' group by job_id order by job_id`,
      )
      expect(rows.length).toBeGreaterThanOrEqual(9)
      expect(rows.length).toBeLessThanOrEqual(11)
      expect(rows.every((r) => r.n === 1)).toBe(true)
      const ticks = rows.map((r) => Number(r.job_id.split(':').pop())).sort((a, b) => a - b)
      for (let i = 1; i < ticks.length; i++) expect(ticks[i]! - ticks[i - 1]!).toBe(1_000)
      // Every tick's job ran once, by one of the processes.
      await waitFor(
        async () => {
          const { rows: h } = await db.pool.query(
            `select count(*)::int as n, count(distinct job_id)::int as d from "${db.schema}".handled`,
          )
          return h[0].n >= rows.length - 1 && h[0].n === h[0].d
        },
        10_000,
        'the ticks to run',
      )
    } finally {
      for (const c of children) c.kill('SIGTERM')
      await Promise.all(children.map((c) => exited(c)))
      await q.close()
    }
  }, 60_000)

  it('two queues with schedulers of the same id each get every one of their ticks (jobIds are unique across queues)', async () => {
    const names = ['sched-twin-a', 'sched-twin-b']
    const queues = names.map(queueOf)
    // Handlers slower than a tick: each tick's job is still live when the other queue ticks at the same second.
    const workers = names.map(
      (n) =>
        new Worker(n, () => new Promise((r) => setTimeout(r, 1_500)), {
          connectionString: db.url,
          schema: db.schema,
          concurrency: 4,
          maintenanceIntervalMs: 0,
          migrate: false,
        }),
    )
    try {
      // A cron pattern with seconds: both queues tick at the same instants.
      for (const q of queues) await q.upsertJobScheduler('same-id', { pattern: '* * * * * *' }, { name: 'tick' })
      await waitFor(
        async () =>
          (
            await db.pool.query<{ n: number }>(
              `select count(*)::int as n from "${db.schema}".jobs where queue = any($1) group by queue having count(*) >= 3`,
              [names],
            )
          ).rowCount === 2,
        20_000,
        'three ticks in each queue',
      )
      for (const q of queues) await q.removeJobScheduler('same-id')
      const { rows } = await db.pool.query<{ queue: string; n: number }>(
        `select queue, count(*)::int as n from "${db.schema}".jobs where queue = any($1) group by queue order by queue`,
        [names],
      )
      expect(rows.map((r) => r.queue)).toEqual(names)
      expect(Math.abs(rows[0]!.n - rows[1]!.n)).toBeLessThanOrEqual(1)
      for (const r of rows) expect(r.n).toBeGreaterThanOrEqual(3)
    } finally {
      await Promise.all(workers.map((w) => w.close()))
      await Promise.all(queues.map((q) => q.close()))
    }
  })

  it("an every schedule ticks on whole milliseconds: its stored ticks and each tick's jobId (sched:<queue>:<id>:<tick ms>)", async () => {
    const q = queueOf('sched-whole')
    const subMs = async () =>
      (
        await db.pool.query<{ next: string; last: string | null }>(
          `select (extract(microseconds from next_run_at)::bigint % 1000)::text as next,
        (extract(microseconds from last_run_at)::bigint % 1000)::text as last
       from "${db.schema}".job_schedulers where queue = 'sched-whole'`,
        )
      ).rows[0]
    try {
      await q.upsertJobScheduler('s', { every: 60_000 }, { name: 'tick' })
      expect(await subMs()).toEqual({ next: '0', last: null })
      // A tick due now, written by hand with microseconds: it ticks at its millisecond.
      const {
        rows: [due],
      } = await db.pool.query<{ ms: string }>(`update "${db.schema}".job_schedulers
        set next_run_at = now() - interval '1.234567 s' where queue = 'sched-whole'
        returning floor(extract(epoch from next_run_at) * 1000)::bigint::text as ms`)
      const worker = new Worker('sched-whole', async () => {}, {
        connectionString: db.url,
        schema: db.schema,
        maintenanceIntervalMs: 0,
        migrate: false,
      })
      try {
        const jobIds = await waitFor(
          async () => {
            const { rows } = await db.pool.query<{ job_id: string }>(
              `select job_id from "${db.schema}".jobs where queue = 'sched-whole'`,
            )
            return rows.length > 0 && rows.map((r) => r.job_id)
          },
          10_000,
          'the tick',
        )
        expect(jobIds).toEqual([`sched:sched-whole:s:${due?.ms}`])
        expect(await subMs()).toEqual({ next: '0', last: '0' })
      } finally {
        await worker.close()
      }
    } finally {
      await q.close()
    }
  })

  it('after an outage adds one job for the missed ticks, not a burst, and goes on from the next time to come', async () => {
    const q = queueOf('sched-missed')
    try {
      await q.upsertJobScheduler('s', { every: 1_000 }, { name: 'tick' })
      // As if no worker had run for an hour.
      await db.pool.query(
        `update "${db.schema}".job_schedulers set next_run_at = now() - interval '1 hour' where queue = 'sched-missed'`,
      )
      const worker = new Worker('sched-missed', async () => {}, {
        connectionString: db.url,
        schema: db.schema,
        maintenanceIntervalMs: 0,
        migrate: false,
      })
      try {
        await waitFor(
          async () => {
            const { rows } = await db.pool.query(
              `select count(*)::int as n from "${db.schema}".jobs where queue = 'sched-missed'`,
            )
            return rows[0].n >= 1
          },
          5_000,
          'the first tick after the outage',
        )
        const [s] = await q.getJobSchedulers()
        expect(s!.nextRunAt.getTime()).toBeGreaterThan(Date.now() - 2_000)
        // Lets time pass on purpose: a burst of the missed ticks would have been added by now.
        await new Promise((r) => setTimeout(r, 500))
        const { rows } = await db.pool.query(
          `select count(*)::int as n from "${db.schema}".jobs where queue = 'sched-missed'`,
        )
        expect(rows[0].n).toBeLessThanOrEqual(2)
      } finally {
        await worker.close()
      }
    } finally {
      await q.close()
    }
  })

  it('stores cron schedules with their time zone; lists and removes them; rejects bad input before any I/O', async () => {
    const q = queueOf('sched-cron')
    try {
      await q.upsertJobScheduler(
        'nightly',
        { pattern: '0 3 * * *', tz: 'Europe/Berlin' },
        { name: 'report', data: { full: true }, opts: { priority: 2 } },
      )
      const [s] = await q.getJobSchedulers()
      expect(s).toMatchObject({
        id: 'nightly',
        pattern: '0 3 * * *',
        tz: 'Europe/Berlin',
        every: null,
        template: { name: 'report', data: { full: true }, opts: { priority: 2 } },
      })
      // 03:00 in Berlin is 01:00 or 02:00 UTC.
      expect([1, 2]).toContain(s!.nextRunAt.getUTCHours())
      expect(s!.nextRunAt.getUTCMinutes()).toBe(0)
      await q.upsertJobScheduler('nightly', { every: 60_000 }, { name: 'report' })
      expect((await q.getJobSchedulers())[0]).toMatchObject({ every: 60_000, pattern: null })
      expect(await q.removeJobScheduler('nightly')).toBe(true)
      expect(await q.removeJobScheduler('nightly')).toBe(false)
      expect(await q.getJobSchedulers()).toEqual([])

      const bad = (repeat: unknown, template: unknown = { name: 't' }) =>
        q.upsertJobScheduler('x', repeat as never, template as never).catch((e: unknown) => e)
      expect(await bad({ pattern: 'not a cron' })).toMatchObject({ name: 'ValidationError', field: 'repeat.pattern' })
      expect(await bad({ pattern: '* * * * *', tz: 'Mars/Base' })).toMatchObject({
        name: 'ValidationError',
        field: 'repeat.tz',
      })
      expect(await bad({ every: 0 })).toMatchObject({ name: 'ValidationError', field: 'repeat.every' })
      expect(await bad({ every: 1_000, pattern: '* * * * *' })).toMatchObject({
        name: 'ValidationError',
        code: 'CONFLICTING_OPTIONS',
      })
      expect(await bad({ every: 1_000 }, { name: 't', opts: { jobId: 'x' } })).toMatchObject({
        name: 'ValidationError',
        field: 'template.opts.jobId',
      })
      expect(await bad({ every: 1_000 }, { name: '' })).toMatchObject({
        name: 'ValidationError',
        field: 'template.name',
      })
      expect(await q.getJobSchedulers()).toEqual([])
    } finally {
      await q.close()
    }
  })
})

describe('settings inside your transaction', () => {
  it('upsertJobScheduler, removeJobScheduler and setRetention with { tx }: rolled back with it, committed with it', async () => {
    const q = queueOf('sched-tx')
    const client = await db.pool.connect()
    try {
      await client.query('begin')
      await q.upsertJobScheduler('in-tx', { every: 60_000 }, { name: 't' }, { tx: client })
      await q.setRetention({ completedMs: 1_000 }, { tx: client })
      // not visible outside before commit
      expect(await q.getJobSchedulers()).toEqual([])
      expect((await q.getRetention()).completedMs).toBe(86_400_000)
      await client.query('rollback')
      expect(await q.getJobSchedulers()).toEqual([])
      expect((await q.getRetention()).completedMs).toBe(86_400_000)

      await client.query('begin')
      await q.upsertJobScheduler('in-tx', { every: 60_000 }, { name: 't' }, { tx: client })
      await q.setRetention({ completedMs: 1_000 }, { tx: client })
      await client.query('commit')
      expect((await q.getJobSchedulers()).map((s) => s.id)).toEqual(['in-tx'])
      expect((await q.getRetention()).completedMs).toBe(1_000)

      await client.query('begin')
      expect(await q.removeJobScheduler('in-tx', { tx: client })).toBe(true)
      await client.query('rollback')
      expect((await q.getJobSchedulers()).map((s) => s.id)).toEqual(['in-tx'])
      await expect(q.removeJobScheduler('in-tx', { tx: null as never })).rejects.toMatchObject({
        name: 'ValidationError',
        field: 'options.tx',
      })
    } finally {
      client.release()
      await q.close()
    }
  })
})
