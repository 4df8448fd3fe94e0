// Fault suite, the database failing under a worker process: backends terminated (pg_terminate_backend) inside
// ctx.transaction, inside ctx.effect, on the LISTEN connection and all of the pool's at once, and PostgreSQL
// restarted under load (`pg_ctlcluster 15 NAME restart -m immediate` on a cluster this file creates).
// Guarantee: no acknowledged add is lost, jobs in flight run again and complete, each effect commits once, the worker
// process never crashes (it runs in a child: alive, no uncaught error, exit code untouched until the test's SIGTERM,
// then 0), and its pool and LISTEN connection heal (a new listener backend; a job added afterwards starts on NOTIFY,
// with the poll an hour away).

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, migrate } from '../../src/index.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'
import { type Child, exited, notSurviving, spawnFixture } from '../helpers/processes.js'
import { type Cluster, clusterUnavailable, createCluster } from '../helpers/clusters.js'
import { terminate } from '../helpers/clients.js'
import { waitFor } from '../helpers/wait.js'
import { sharedListenerName } from '../helpers/listeners.js'

const TABLES = (s: string) => `
  create table ${s}.runs (job_id bigint not null, attempt int not null, pid int not null, at timestamptz not null default clock_timestamp());
  create table ${s}.done (job_id bigint not null, attempt int not null, pid int not null);
  create table ${s}.stale (job_id bigint not null, attempt int not null, pid int not null, error text);
  create table ${s}.victims (job_id bigint not null, attempt int not null, pid int not null, backend int);`
/** The worker child's pool connections carry this application_name (its listener names itself). */
const APP = 'pgonce-fault-worker'
const withApp = (url: string) => `${url}${url.includes('?') ? '&' : '?'}application_name=${APP}`

let db: TestSchema
const children: Child[] = []

beforeAll(async () => {
  db = await freshSchema('fault_db')
  await db.pool.query(TABLES(`"${db.schema}"`))
})
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL')
  await Promise.all(children.map(exited))
  await db?.drop()
})

function startWorker(url: string, schema: string, env: Record<string, string> = {}): Child {
  const child = spawnFixture('fault-worker.ts', {
    PGONCE_URL: withApp(url),
    PGONCE_SCHEMA: schema,
    QUEUE: 'faults',
    CONCURRENCY: '4',
    LEASE_MS: '3000',
    MAINTENANCE_MS: '200',
    POLL_MS: '3600000',
    ...env,
  })
  children.push(child)
  return child
}

/** The child's LISTEN backend as it last reported it (worker.listenerPid). */
const listenerPid = (child: Child): number | null => {
  const reports = child.messages().filter((m) => 'listenerPid' in m)
  return (reports[reports.length - 1]?.listenerPid as number | null | undefined) ?? null
}

const one = async <T>(pool: pg.Pool, sql: string, values: unknown[] = []): Promise<T> =>
  (await pool.query(sql, values)).rows[0] as T

/** Adds a job and checks, by the database clock, that the idle worker started it on NOTIFY (well under the poll). */
async function startsOnNotify(pool: pg.Pool, schema: string, queue: Queue): Promise<void> {
  const job = await queue.add('ping', { mode: 'sleep', ms: 0 })
  const lag = await waitFor(
    async () =>
      (
        await one<{ lag: number | null }>(
          pool,
          `select (extract(epoch from r.at - j.created_at) * 1000)::float8 as lag from "${schema}".runs r join "${schema}".jobs j on j.id = r.job_id
     where r.job_id = $1`,
          [job.id],
        )
      )?.lag,
    10_000,
    'the job added after the fault to start',
  )
  expect(lag).toBeLessThan(2_000)
}

describe('backends terminated under a worker process', () => {
  let worker: Child
  let queue: Queue
  beforeAll(async () => {
    queue = new Queue('faults', { connectionString: db.url, schema: db.schema, migrate: false })
    worker = startWorker(db.url, db.schema)
    await waitFor(
      () => worker.messages().some((m) => m.ready) && listenerPid(worker) !== null,
      30_000,
      'the worker to start',
    )
  })
  afterAll(async () => {
    await queue?.close()
  })

  it.each(['tx-victim', 'effect-victim'] as const)(
    '%s: the backend killed mid-transaction rolls it back; the job runs again and commits once',
    async (mode) => {
      const job = await queue.add('victim', { mode }, { attempts: 3 })
      const victim = await waitFor(
        async () =>
          (
            await one<{ backend: number } | undefined>(
              db.pool,
              `select backend from "${db.schema}".victims where job_id = $1 and attempt = 1`,
              [job.id],
            )
          )?.backend,
        10_000,
        'the handler to open its transaction',
      )
      expect(await terminate(db.pool, victim)).toBe(true)
      await waitFor(
        async () =>
          (await one<{ state: string }>(db.pool, `select state from "${db.schema}".jobs where id = $1`, [job.id]))
            .state === 'completed',
        15_000,
        'the job to run again and complete',
      )
      const row = await one<{ attempts: number; result: Record<string, unknown> }>(
        db.pool,
        `select attempts, result from "${db.schema}".jobs where id = $1`,
        [job.id],
      )
      expect(row).toMatchObject({ attempts: 2, result: { attempt: 2 } })
      // Attempt 1's writes died with its transaction: only attempt 2's committed.
      const { rows: done } = await db.pool.query(`select attempt from "${db.schema}".done where job_id = $1`, [job.id])
      expect(done).toEqual([{ attempt: 2 }])
      if (mode === 'effect-victim') {
        expect(row.result.outcome).toBe('ran')
        const { rows } = await db.pool.query(
          `select effect_key from "${db.schema}".processed_effects where effect_key = $1`,
          [`effect:${job.id}`],
        )
        expect(rows).toHaveLength(1)
      }
      expect(notSurviving(worker)).toBeNull()
    },
  )

  // Defect found by this suite (fixed in src/worker/notifier.ts): pg lets a connection string's parameters override the
  // client config, so an application_name in the worker's connectionString replaced the listener's own name.
  it("the LISTEN backend is named 'pgonce-listener <host>:<pid>:shared' even when the connection string sets application_name", async () => {
    const pid = listenerPid(worker)!
    const { rows } = await db.pool.query<{ application_name: string }>(
      'select application_name from pg_stat_activity where pid = $1',
      [pid],
    )
    const id = worker.messages().find((m) => m.ready)?.workerId
    expect(rows[0]?.application_name).toBe(sharedListenerName(String(id)))
    expect(rows[0]?.application_name).toMatch(/^pgonce-listener .+:\d+:shared$/)
  })

  it('the LISTEN connection killed: a new listener backend, and the next job starts on NOTIFY', async () => {
    const old = listenerPid(worker)!
    expect(await terminate(db.pool, old)).toBe(true)
    const fresh = await waitFor(
      () => {
        const pid = listenerPid(worker)
        return pid !== null && pid !== old ? pid : undefined
      },
      15_000,
      'a new LISTEN backend',
    )
    expect((await db.pool.query('select 1 from pg_stat_activity where pid = $1', [fresh])).rows).toHaveLength(1)
    await startsOnNotify(db.pool, db.schema, queue)
    expect(notSurviving(worker)).toBeNull()
  })

  it("every pool backend killed at once while jobs run: the pool heals, each job's two effects commit once", async () => {
    const jobs = await queue.addBulk(
      Array.from({ length: 12 }, () => ({ name: 'e', data: { mode: 'effects', ms: 150 }, opts: { attempts: 5 } })),
    )
    const ids = jobs.map((j) => j.id)
    await waitFor(
      async () =>
        (
          await one<{ n: number }>(
            db.pool,
            `select count(*)::int as n from "${db.schema}".done where job_id = any($1)`,
            [ids],
          )
        ).n > 0,
      10_000,
      'the first effects',
    )
    const { rows: killed } = await db.pool.query<{ ok: boolean }>(
      'select pg_terminate_backend(pid) as ok from pg_stat_activity where application_name = $1',
      [APP],
    )
    expect(killed.length).toBeGreaterThan(0)
    await waitFor(
      async () =>
        (
          await one<{ n: number }>(
            db.pool,
            `select count(*)::int as n from "${db.schema}".jobs where id = any($1) and state = 'completed'`,
            [ids],
          )
        ).n === 12,
      20_000,
      'all 12 to complete',
    )
    const { rows: perKey } = await db.pool.query<{ n: number }>(
      `select count(*)::int as n from "${db.schema}".processed_effects where effect_key like any($1)`,
      [ids.map((id) => `${id}:%`)],
    )
    expect(perKey[0]!.n).toBe(24)
    const { rows: dup } = await db.pool.query(
      `select job_id, count(*) from "${db.schema}".done where job_id = any($1) group by 1 having count(*) <> 2`,
      [ids],
    )
    expect(dup).toEqual([])
    await startsOnNotify(db.pool, db.schema, queue)
    expect(notSurviving(worker)).toBeNull()
  })

  it('after all that, the worker closes cleanly on SIGTERM (exit code 0)', async () => {
    expect(notSurviving(worker)).toBeNull()
    worker.kill('SIGTERM')
    expect(await exited(worker)).toBe(0)
  })
})

describe('PostgreSQL restarted under load (restart -m immediate)', async () => {
  const unavailable = await clusterUnavailable()
  let cluster: Cluster | undefined
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL')
    await Promise.all(children.map(exited))
    await cluster?.drop()
  })

  it.skipIf(unavailable !== null)(
    `no acknowledged add lost, in-flight jobs complete, the worker survives and heals${unavailable ? ` (skipped: ${unavailable})` : ''}`,
    async () => {
      cluster = await createCluster('pgoncefault')
      const schema = 'pgonce'
      await migrate({ connectionString: cluster.url, schema })
      const pool = new pg.Pool({ connectionString: cluster.url, max: 2 })
      pool.on('error', () => {})
      const queue = new Queue('faults', { connectionString: cluster.url, schema, migrate: false, poolSize: 4 })
      try {
        await pool.query(TABLES(schema))
        const worker = startWorker(cluster.url, schema, { LEASE_MS: '2000', MAINTENANCE_MS: '300' })
        await waitFor(
          () => worker.messages().some((m) => m.ready) && listenerPid(worker) !== null,
          30_000,
          'the worker to start',
        )
        const listenerBefore = listenerPid(worker)

        const acked: string[] = []
        let refused = 0
        let producing = true
        const producer = (async () => {
          for (let i = 0; producing; i++) {
            try {
              const opts = i % 3 === 0 ? { attempts: 10, jobId: `restart-${i}` } : { attempts: 10 }
              acked.push((await queue.add('e', { mode: 'effects', ms: 100 }, opts)).id)
            } catch {
              refused++
              await new Promise((r) => setTimeout(r, 50))
            }
            await new Promise((r) => setTimeout(r, 10))
          }
        })()
        await waitFor(
          async () =>
            (await one<{ n: number }>(pool, `select count(*)::int as n from ${schema}.jobs where state = 'active'`)).n >
            0,
          10_000,
          'jobs in flight',
        )
        // Lets the load run on purpose (more jobs in flight); nothing here races.
        await new Promise((r) => setTimeout(r, 500))
        // And more than 10 adds acknowledged before the restart, which on a loaded machine (the version matrix runs two
        // servers at once) 500 ms did not always give: the count below must be more than the 10 after it.
        await waitFor(() => acked.length > 10, 15_000, 'more than 10 adds acknowledged before the restart')
        const { rows: inFlight } = await pool.query<{ id: string }>(
          `select id::text from ${schema}.jobs where state = 'active'`,
        )
        await cluster.restartImmediate()
        const ackedAtRestart = acked.length
        await waitFor(() => acked.length >= ackedAtRestart + 10, 30_000, 'adds acknowledged again after the restart')
        producing = false
        await producer
        expect(acked.length).toBeGreaterThan(20)

        await waitFor(
          async () =>
            (
              await one<{ n: number }>(
                pool,
                `select count(*)::int as n from ${schema}.jobs where id = any($1) and state = 'completed'`,
                [acked],
              )
            ).n === acked.length,
          45_000,
          `all ${acked.length} acknowledged jobs to complete`,
        )
        const {
          rows: [tally],
        } = await pool.query<{ jobs: number; effects: number; done: number }>(
          `select (select count(*)::int from ${schema}.jobs where id = any($1)) as jobs,
                (select count(*)::int from ${schema}.processed_effects where effect_key like any($2)) as effects,
                (select count(*)::int from ${schema}.done where job_id = any($1)) as done`,
          [acked, acked.map((id) => `${id}:%`)],
        )
        expect(tally).toEqual({ jobs: acked.length, effects: 2 * acked.length, done: 2 * acked.length })
        expect(inFlight.length).toBeGreaterThan(0)
        const { rows: unfinished } = await pool.query(
          `select id from ${schema}.jobs where id = any($1) and state <> 'completed'`,
          [inFlight.map((r) => r.id)],
        )
        expect(unfinished).toEqual([])

        // Healed: a new LISTEN backend, and an add wakes the idle worker by NOTIFY.
        const listenerAfter = await waitFor(
          () => {
            const pid = listenerPid(worker)
            return pid !== null && pid !== listenerBefore ? pid : undefined
          },
          15_000,
          'the listener to reconnect',
        )
        expect(listenerAfter).not.toBe(listenerBefore)
        await startsOnNotify(pool, schema, queue)
        expect(notSurviving(worker)).toBeNull()
        expect(worker.messages().some((m) => 'error' in m)).toBe(true) // the outage was reported, not thrown
        worker.kill('SIGTERM')
        expect(await exited(worker)).toBe(0)
        void refused
      } finally {
        await queue.close()
        await pool.end()
      }
    },
    120_000,
  )
})
