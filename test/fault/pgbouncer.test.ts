// Fault suite, PgBouncer in transaction mode (a pgbouncer of the test's own: temp config, trust auth, a free port, in
// front of the test server). Guarantee: with pgonce's options for it (`preparedStatements: false` on Queue, Worker
// and Effects, the Worker's `listenConnectionString` pointed at PostgreSQL directly) adds, dedup, a worker, effects
// and wake-ups work through it, and polling works with `listen: false`. Without `preparedStatements: false`,
// concurrent adds through PgBouncer 1.18 fail (named statements do not survive the hop between server
// connections): the reason the option exists.
// pgbouncer missing: skipped, or a failure naming the install command when REQUIRE_PGBOUNCER=1 (CI).

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, Queue, SetupError, Worker, runMaintenance } from '../../src/index.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'
import { type Bouncer, PGBOUNCER_INSTALL_HINT, pgbouncerBinary, startPgbouncer } from '../helpers/pgbouncer.js'
import { waitFor } from '../helpers/wait.js'
import { waitForIdleSlot } from '../helpers/idle-slots.js'

const binary = await pgbouncerBinary()
const required = process.env.REQUIRE_PGBOUNCER === '1'

describe.runIf(binary === null && required)('PgBouncer (required: REQUIRE_PGBOUNCER=1)', () => {
  it('is installed', () => {
    throw new Error(`pgbouncer is not installed but REQUIRE_PGBOUNCER=1: ${PGBOUNCER_INSTALL_HINT}`)
  })
})

describe.skipIf(binary === null)(
  `through PgBouncer in transaction mode${binary === null ? ` (skipped: pgbouncer not installed; ${PGBOUNCER_INSTALL_HINT})` : ''}`,
  () => {
    let db: TestSchema
    let bouncer: Bouncer
    const closers: (() => Promise<void>)[] = []
    const opts = () => ({ connectionString: bouncer.url, schema: db.schema, migrate: false, preparedStatements: false })

    beforeAll(async () => {
      db = await freshSchema('fault_bouncer')
      // Few server connections for many clients: every transaction may land on another one.
      bouncer = await startPgbouncer(binary!, db.url, 3)
    })
    afterAll(async () => {
      for (const close of closers.reverse()) await close().catch(() => {})
      await bouncer?.stop()
      await db?.drop()
    })

    const queueOf = (name: string, named = false): Queue => {
      const q = new Queue(name, { ...opts(), preparedStatements: named, poolSize: 12 })
      closers.push(() => q.close())
      return q
    }

    it('is a transaction-mode bouncer: 6 clients share its 3 server connections, transaction by transaction', async () => {
      const clients = Array.from({ length: 6 }, () => new pg.Client({ connectionString: bouncer.url }))
      await Promise.all(clients.map((c) => c.connect()))
      try {
        const pids = new Set<number>()
        for (let round = 0; round < 5; round++) {
          const rows = await Promise.all(
            clients.map((c) => c.query<{ pid: number }>('select pg_backend_pid() as pid, pg_sleep(0.01)')),
          )
          for (const r of rows) pids.add(r.rows[0]!.pid)
        }
        expect(pids.size).toBeLessThanOrEqual(3)
      } finally {
        await Promise.all(clients.map((c) => c.end()))
      }
    })

    it('adds: 50 concurrent adds of one jobId give one job; dedup keys and addBulk answer as without it', async () => {
      const q = queueOf('bouncer-adds')
      const same = await Promise.all(Array.from({ length: 50 }, (_, i) => q.add('j', { i }, { jobId: 'bouncer-one' })))
      expect(new Set(same.map((j) => j.id)).size).toBe(1)
      expect(same.filter((j) => !j.deduplicated)).toHaveLength(1)
      const keyed = await Promise.all(
        Array.from({ length: 30 }, (_, i) => q.add('k', { i }, { deduplication: { id: `bk-${i % 3}`, ttl: 60_000 } })),
      )
      expect(new Set(keyed.map((j) => j.id)).size).toBe(3)
      const bulk = await Promise.all(
        Array.from({ length: 10 }, () =>
          q.addBulk([
            { name: 'b', data: {}, opts: { jobId: 'bulk-a' } },
            { name: 'b', data: {}, opts: { deduplication: { id: 'bulk-k' } } },
            { name: 'b', data: {} },
          ]),
        ),
      )
      expect(new Set(bulk.map((b) => b[0]!.id)).size).toBe(1)
      expect(new Set(bulk.map((b) => b[1]!.id)).size).toBe(1)
      expect(new Set(bulk.map((b) => b[2]!.id)).size).toBe(10)
      expect(await q.getDeduplicationJobId('bk-0')).toBe(keyed[0]!.id)
      const { rows } = await db.pool.query<{ n: number }>(
        `select count(*)::int as n from "${db.schema}".jobs where queue = 'bouncer-adds'`,
      )
      expect(rows[0]!.n).toBe(1 + 3 + 2 + 10)
    })

    it('a worker (listening past the bouncer) runs jobs and effects once, and wakes on NOTIFY within the poll', async () => {
      const q = queueOf('bouncer-work')
      const effects = new Effects(opts())
      closers.push(() => effects.close())
      const started = new Map<string, number>()
      const worker = new Worker<{ n: number }>(
        'bouncer-work',
        async (job, ctx) => {
          started.set(job.id, Date.now())
          await ctx.effect(`bouncer:${job.data.n}`, async (tx) => {
            await tx.query('select 1')
          })
          return ctx.transaction(
            async (tx) => (await tx.query<{ n: number }>('select $1::int as n', [job.data.n])).rows[0]!.n,
          )
        },
        { ...opts(), concurrency: 8, listenConnectionString: db.url, pollIntervalMs: 60_000, maintenanceIntervalMs: 0 },
      )
      const errors: Error[] = []
      worker.on('error', (err) => errors.push(err))
      closers.push(() => worker.close())
      await worker.run()
      const jobs = await q.addBulk(Array.from({ length: 40 }, (_, n) => ({ name: 'w', data: { n } })))
      await waitFor(
        async () =>
          (
            await db.pool.query<{ n: number }>(
              `select count(*)::int as n from "${db.schema}".jobs where queue = 'bouncer-work' and state = 'completed'`,
            )
          ).rows[0]!.n === 40,
        20_000,
        'all 40 jobs to complete through the bouncer',
      )
      const { rows } = await db.pool.query<{ n: number }>(
        `select count(*)::int as n from "${db.schema}".processed_effects where effect_key like 'bouncer:%'`,
      )
      expect(rows[0]!.n).toBe(40)
      expect((await q.getJob(jobs[7]!.id))?.result).toBe(7)
      // Asleep now: only a NOTIFY (sent by an add through the bouncer, heard on the direct LISTEN connection) can start the
      // next job within the minute-long poll.
      await waitForIdleSlot(db, 'bouncer-work')
      const t0 = Date.now()
      const ping = await q.add('w', { n: 1000 })
      await waitFor(() => started.has(ping.id), 5_000, 'the job added through the bouncer to wake the worker')
      expect(started.get(ping.id)! - t0).toBeLessThan(2_000)
      // The same through Effects.runOnce, unnamed statements behind the bouncer.
      expect(await effects.runOnce('bouncer:run-once', () => {})).toBe('ran')
      expect(await effects.runOnce('bouncer:run-once', () => {})).toBe('duplicate-done')
      expect(errors).toEqual([])
    })

    it('with listen: false, a worker polls through the bouncer alone', async () => {
      const q = queueOf('bouncer-poll')
      const seen = new Set<string>()
      const worker = new Worker(
        'bouncer-poll',
        async (job) => {
          seen.add(job.id)
        },
        { ...opts(), listen: false, pollIntervalMs: 200, maintenanceIntervalMs: 0 },
      )
      closers.push(() => worker.close())
      await worker.run()
      expect(worker.listenerPid).toBeNull()
      // Lets time pass on purpose: the worker's first claims find the queue empty, so that a poll finds the job (any
      // claim would run it: nothing here races).
      await new Promise((r) => setTimeout(r, 300))
      const job = await q.add('p', {})
      await waitFor(() => seen.has(job.id), 5_000, 'the poll to find the job')
    })

    it('housekeeping through the bouncer: rounds from several runners take turns, none is locked out by a lock left on a server connection', async () => {
      const q = queueOf('bouncer-maint')
      const jobs = await q.addBulk(Array.from({ length: 6 }, () => ({ name: 'm', data: {}, opts: { attempts: 3 } })))
      const expire = () =>
        db.pool.query(
          `update "${db.schema}".jobs set state = 'active', attempts = 1, lock_token = gen_random_uuid(), locked_by = 'dead',
         locked_until = now() - interval '1 second' where queue = 'bouncer-maint'`,
        )
      // Rounds one after another, each through the bouncer (3 server connections): every one runs (a session lock
      // left on a server connection made later ones return ran: false) and rescues what expired since the last.
      for (let round = 0; round < 6; round++) {
        await expire()
        const r = await runMaintenance({ connectionString: bouncer.url, schema: db.schema })
        expect(r, `round ${round}`).toMatchObject({ ran: true, rescued: jobs.length })
      }
      // Concurrent rounds: exactly one works at a time, and together they rescue every job once.
      await expire()
      const rounds = await Promise.all(
        Array.from({ length: 4 }, () => runMaintenance({ connectionString: bouncer.url, schema: db.schema })),
      )
      expect(rounds.reduce((n, r) => n + r.rescued, 0)).toBe(jobs.length)
      expect(rounds.filter((r) => r.ran).length).toBeGreaterThanOrEqual(1)
    })

    it('without preparedStatements: false, concurrent adds through PgBouncer 1.18 fail (why the option exists), with a SetupError naming it', async () => {
      const q = queueOf('bouncer-named', true)
      const failures: unknown[] = []
      for (let round = 0; round < 5 && failures.length === 0; round++) {
        const results = await Promise.allSettled(
          Array.from({ length: 40 }, (_, i) => q.add('n', { i }, { jobId: `named-${round}-${i % 5}` })),
        )
        for (const r of results) if (r.status === 'rejected') failures.push(r.reason)
      }
      // 26000: prepared statement "pgonce_…" does not exist; 42P05: … already exists (the hop between server connections).
      expect(failures.length).toBeGreaterThan(0)
      for (const f of failures) {
        expect(f).toBeInstanceOf(SetupError)
        const e = f as SetupError
        expect({ code: e.code, fix: e.fix }).toMatchObject({
          code: 'PREPARED_STATEMENTS',
          fix: expect.stringContaining('`preparedStatements: false`'),
        })
        expect(e.message).toContain('preparedStatements: false')
        expect(e.sqlstate).toMatch(/^(26000|42P05|08P01)$/)
        expect((e.cause as Error).message).toMatch(/prepared statement "pgonce_/)
      }
    })

    it("a worker whose LISTEN goes through the bouncer: an 'error' naming listenConnectionString, and it polls meanwhile", async () => {
      const q = queueOf('bouncer-deaf')
      const seen = new Set<string>()
      const errors: Error[] = []
      const worker = new Worker('bouncer-deaf', async (job) => void seen.add(job.id), {
        ...opts(),
        pollIntervalMs: 200,
        maintenanceIntervalMs: 0,
      })
      worker.on('error', (err) => errors.push(err))
      closers.push(() => worker.close())
      const deaf = await waitFor(
        () => errors.find((e): e is SetupError => e instanceof SetupError),
        10_000,
        "the worker's 'error'",
      )
      expect(deaf.code).toBe('LISTEN_UNHEARD')
      expect(deaf.message).toContain('listenConnectionString')
      // No idle slot or hand-off lock is taken on its behalf (a session lock through the bouncer would strand on a server connection).
      expect(worker.listenerPid).toBeNull()
      const job = await q.add('p', {})
      await waitFor(() => seen.has(job.id), 5_000, 'the poll to find the job')
      expect(errors.filter((e) => e instanceof SetupError)).toHaveLength(1)
    })

    it('a bouncer that refuses the options parameter: a SetupError naming ignore_startup_parameters', async () => {
      const strict = await startPgbouncer(binary!, db.url, 1, 'extra_float_digits')
      try {
        const q = new Queue('bouncer-strict', {
          connectionString: strict.url,
          schema: db.schema,
          migrate: false,
          preparedStatements: false,
        })
        const err = await q.add('x', {}).then(
          () => null,
          (e: unknown) => e,
        )
        await q.close()
        expect(err).toBeInstanceOf(SetupError)
        expect((err as SetupError).code).toBe('STARTUP_PARAMETER')
        expect((err as SetupError).message).toContain('ignore_startup_parameters')
      } finally {
        await strict.stop()
      }
    })
  },
)
