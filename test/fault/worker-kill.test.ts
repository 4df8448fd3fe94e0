// Fault suite, workers that die or freeze: a worker process SIGKILLed mid-job, one frozen with SIGSTOP past its lease
// and then resumed, rescues racing completions, and every fenced statement replayed with a stale token.
// Guarantee: each job completes once (one committed completion, counted from the database), a run whose lease was
// taken over changes nothing (its ctx.transaction is refused, its statements match no row), and no job is rescued
// before its lease ran out (database clock).

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker, runMaintenance } from '../../src/index.js'
import { sqlFor } from '../../src/db/sql-files.js'
import { newTokenPrefix } from '../../src/worker/job-store.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'
import { type Child, exited, notSurviving, spawnFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

let db: TestSchema
const children: Child[] = []

beforeAll(async () => {
  db = await freshSchema('fault_kill')
  const s = `"${db.schema}"`
  await db.pool.query(`
    create table ${s}.runs (job_id bigint not null, attempt int not null, pid int not null, at timestamptz not null default clock_timestamp());
    create table ${s}.done (job_id bigint not null, attempt int not null, pid int not null);
    create table ${s}.stale (job_id bigint not null, attempt int not null, pid int not null, error text);
    create table ${s}.victims (job_id bigint not null, attempt int not null, pid int not null, backend int);`)
})
/** Ends every worker process a test started (their housekeeping would rescue the next test's jobs). */
async function killChildren(): Promise<void> {
  const all = children.splice(0)
  for (const c of all) c.kill('SIGKILL')
  await Promise.all(all.map(exited))
}
afterEach(killChildren)
afterAll(async () => {
  await killChildren()
  await db?.drop()
})

function worker(queue: string, env: Record<string, string>): Child {
  const child = spawnFixture('fault-worker.ts', { PGONCE_URL: db.url, PGONCE_SCHEMA: db.schema, QUEUE: queue, ...env })
  children.push(child)
  return child
}

const count = async (sql: string, values: unknown[] = []): Promise<number> =>
  (await db.pool.query<{ n: number }>(sql, values)).rows[0]!.n

describe('a worker process SIGKILLed mid-job', () => {
  it('its jobs are rescued after the lease (not before), run again elsewhere, and each completes once', async () => {
    const queue = new Queue('kill', { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      const jobs = await queue.addBulk(
        Array.from({ length: 6 }, () => ({ name: 'j', data: { mode: 'hang-first' }, opts: { attempts: 3 } })),
      )
      const ids = jobs.map((j) => j.id)
      const victim = worker('kill', { CONCURRENCY: '8', LEASE_MS: '1500' })
      await waitFor(
        async () =>
          (await count(`select count(*)::int as n from "${db.schema}".runs where job_id = any($1)`, [ids])) === 6,
        30_000,
        'the victim to start all six jobs',
      )
      victim.kill('SIGKILL')
      expect(await exited(victim)).toBe('SIGKILL')
      const { rows: leases } = await db.pool.query<{ id: string; locked_until: Date }>(
        `select id::text, locked_until from "${db.schema}".jobs where id = any($1)`,
        [ids],
      )
      const survivor = worker('kill', { CONCURRENCY: '8', LEASE_MS: '1500', MAINTENANCE_MS: '200', POLL_MS: '200' })
      await waitFor(
        async () =>
          (await count(
            `select count(*)::int as n from "${db.schema}".jobs where id = any($1) and state = 'completed'`,
            [ids],
          )) === 6,
        30_000,
        'the survivor to complete all six',
      )

      const { rows } = await db.pool.query<{
        id: string
        attempts: number
        done: number
        runs: number
        second_at: Date
      }>(
        `select j.id::text, j.attempts,
           (select count(*)::int from "${db.schema}".done d where d.job_id = j.id) as done,
           (select count(*)::int from "${db.schema}".runs r where r.job_id = j.id) as runs,
           (select max(at) from "${db.schema}".runs r where r.job_id = j.id and r.attempt = 2) as second_at
         from "${db.schema}".jobs j where j.id = any($1) order by j.id`,
        [ids],
      )
      for (const r of rows) {
        expect(r).toMatchObject({ attempts: 2, done: 1, runs: 2 })
        // Rescued only once the dead worker's lease had run out, by the database clock.
        expect(r.second_at.getTime()).toBeGreaterThanOrEqual(leases.find((l) => l.id === r.id)!.locked_until.getTime())
      }
      expect(notSurviving(survivor)).toBeNull()
    } finally {
      await queue.close()
    }
  }, 60_000)
})

describe('a worker process frozen with SIGSTOP past its lease, then resumed', () => {
  it('the job is rescued and completed by another worker; the resumed run is refused and changes nothing', async () => {
    const queue = new Queue('freeze', { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      const frozen = worker('freeze', { CONCURRENCY: '2', LEASE_MS: '1000', HEARTBEAT_MS: '200', POLL_MS: '100' })
      await waitFor(() => frozen.messages().some((m) => m.ready), 30_000, 'the first worker to start')
      const job = await queue.add('j', { mode: 'sleep', ms: 1500 }, { attempts: 3 })
      await waitFor(
        async () =>
          (await count(`select count(*)::int as n from "${db.schema}".runs where job_id = $1`, [job.id])) === 1,
        10_000,
        'the first worker to start the job',
      )
      frozen.kill('SIGSTOP')
      // Read after the freeze: no heartbeat can move it any more.
      const {
        rows: [held],
      } = await db.pool.query<{ locked_until: Date; lock_token: string }>(
        `select locked_until, lock_token from "${db.schema}".jobs where id = $1`,
        [job.id],
      )
      const rescuer = worker('freeze', { CONCURRENCY: '2', LEASE_MS: '5000', MAINTENANCE_MS: '200', POLL_MS: '100' })
      try {
        await waitFor(
          async () =>
            (await count(`select count(*)::int as n from "${db.schema}".runs where job_id = $1 and pid = $2`, [
              job.id,
              rescuer.pid,
            ])) === 1,
          20_000,
          'the rescuer to run the job again',
        )
      } finally {
        frozen.kill('SIGCONT')
      }
      await waitFor(
        async () =>
          (await count(`select count(*)::int as n from "${db.schema}".stale where job_id = $1`, [job.id])) === 1,
        10_000,
        'the resumed run to try to complete',
      )
      await waitFor(
        async () =>
          (await count(`select count(*)::int as n from "${db.schema}".jobs where id = $1 and state = 'completed'`, [
            job.id,
          ])) === 1,
        10_000,
        'the rescuer to complete the job',
      )

      const {
        rows: [row],
      } = await db.pool.query<{ attempts: number; result: { pid: number }; lock_token: string }>(
        `select attempts, result, lock_token from "${db.schema}".jobs where id = $1`,
        [job.id],
      )
      expect(row).toMatchObject({ attempts: 2, result: { attempt: 2, pid: rescuer.pid } })
      expect(row!.lock_token).not.toBe(held!.lock_token)
      // One completion committed: the rescuer's. The resumed run's ctx.transaction was refused with LeaseLostError.
      const { rows: done } = await db.pool.query(`select attempt, pid from "${db.schema}".done where job_id = $1`, [
        job.id,
      ])
      expect(done).toEqual([{ attempt: 2, pid: rescuer.pid }])
      const { rows: stale } = await db.pool.query(
        `select attempt, pid, error from "${db.schema}".stale where job_id = $1`,
        [job.id],
      )
      expect(stale).toEqual([{ attempt: 1, pid: frozen.pid, error: 'LeaseLostError' }])
      const {
        rows: [second],
      } = await db.pool.query<{ at: Date }>(`select at from "${db.schema}".runs where job_id = $1 and attempt = 2`, [
        job.id,
      ])
      expect(second!.at.getTime()).toBeGreaterThanOrEqual(held!.locked_until.getTime())
      // The frozen worker survived its own lost lease.
      expect(notSurviving(frozen)).toBeNull()
    } finally {
      await queue.close()
    }
  }, 60_000)
})

describe('rescues racing completions', () => {
  it('whichever commits first wins; each job completes exactly once, with the result of the run that won', async () => {
    const queue = new Queue('race', { connectionString: db.url, schema: db.schema, migrate: false })
    let open!: () => void
    const gate = new Promise<void>((r) => (open = r))
    const completedEvents = new Map<string, number>()
    const lost: string[] = []
    const w = new Worker<{ tx: boolean }>(
      'race',
      async (job, ctx) => {
        if (job.attempts === 1) await gate
        if (!job.data.tx) return { attempt: job.attempts }
        return ctx.transaction(async (tx) => {
          await tx.query(`insert into "${db.schema}".done (job_id, attempt, pid) values ($1, $2, 0)`, [
            job.id,
            job.attempts,
          ])
          return { attempt: job.attempts }
        })
      },
      {
        connectionString: db.url,
        schema: db.schema,
        concurrency: 24,
        leaseMs: 60_000,
        heartbeatMs: 30_000,
        pollIntervalMs: 100,
        maintenanceIntervalMs: 0,
        migrate: false,
      },
    )
    w.on('completed', (job) => completedEvents.set(job.id, (completedEvents.get(job.id) ?? 0) + 1))
    w.on('error', (err) => lost.push(err.name))
    try {
      const jobs = await queue.addBulk(
        Array.from({ length: 24 }, (_, i) => ({ name: 'r', data: { tx: i % 2 === 0 }, opts: { attempts: 3 } })),
      )
      const ids = jobs.map((j) => j.id)
      await waitFor(
        async () =>
          (await count(`select count(*)::int as n from "${db.schema}".jobs where id = any($1) and state = 'active'`, [
            ids,
          ])) === 24,
        10_000,
        'all 24 handlers to start',
      )
      // Every lease expired (backdated), then the rescue and the completions race.
      await db.pool.query(
        `update "${db.schema}".jobs set locked_until = now() - interval '1 second' where id = any($1)`,
        [ids],
      )
      const rescue = runMaintenance({ connectionString: db.url, schema: db.schema })
      open()
      const { rescued } = await rescue
      await waitFor(
        async () =>
          (await count(
            `select count(*)::int as n from "${db.schema}".jobs where id = any($1) and state = 'completed'`,
            [ids],
          )) === 24,
        15_000,
        'all 24 to complete',
      )
      await new Promise((r) => setTimeout(r, 300)) // any late duplicate completion would show by now

      const { rows } = await db.pool.query<{
        id: string
        attempts: number
        result: { attempt: number }
        tx: boolean
        done: number
      }>(
        `select j.id::text, j.attempts, j.result, (j.data->>'tx')::boolean as tx,
           (select count(*)::int from "${db.schema}".done d where d.job_id = j.id and d.attempt = j.attempts) as done
         from "${db.schema}".jobs j where j.id = any($1)`,
        [ids],
      )
      const rescuedJobs = rows.filter((r) => r.attempts === 2).length
      expect(rescuedJobs).toBe(rescued)
      for (const r of rows) {
        expect([1, 2]).toContain(r.attempts)
        expect(r.result.attempt).toBe(r.attempts)
        if (r.tx) expect(r.done).toBe(1)
        expect(completedEvents.get(r.id)).toBe(1)
      }
      const txDone = await count(
        `select count(*)::int as n from "${db.schema}".done where job_id = any($1) and pid = 0`,
        [ids],
      )
      expect(txDone).toBe(12)
      // Runs that lost the race learned it (LeaseLostError), and nothing else went wrong.
      expect(lost.filter((n) => n !== 'LeaseLostError')).toEqual([])
    } finally {
      open()
      await w.close()
      await queue.close()
    }
  }, 60_000)
})

describe('a stale lock token', () => {
  it('changes nothing through any fenced statement once the lease was rescued and the job claimed again', async () => {
    const queue = new Queue('stale', { connectionString: db.url, schema: db.schema, migrate: false })
    const s = db.schema
    try {
      const job = await queue.add('s', {}, { attempts: 5 })
      const claim = async (): Promise<string> => {
        const { rows } = await db.pool.query<{ lock_token: string }>(sqlFor('claim-jobs', s), [
          'stale',
          1,
          60_000,
          'manual',
          newTokenPrefix(),
          -2_147_483_648,
          '-100000000000000000',
          '0',
          null,
        ])
        expect(rows).toHaveLength(1)
        return rows[0]!.lock_token
      }
      const old = await claim()
      await db.pool.query(`update "${s}".jobs set locked_until = now() - interval '1 second' where id = $1`, [job.id])
      expect((await runMaintenance({ connectionString: db.url, schema: s })).rescued).toBe(1)
      const current = await claim()
      expect(current).not.toBe(old)
      const snapshot = async () =>
        (await db.pool.query(`select to_jsonb(j) as row from "${s}".jobs j where id = $1`, [job.id])).rows[0].row
      const before = await snapshot()

      const attempts: [string, unknown[]][] = [
        ['complete-jobs', [[job.id], [old], ['{"stale":true}']]],
        ['fail-job', [job.id, old, 'stale failure', null, 0]],
        ['heartbeat', [[job.id], [old], 600_000]],
        ['release-jobs', [[job.id], [old], 0]],
        ['update-progress', [job.id, old, '{"stale":true}']],
        ['outcome-recorded', [[job.id], [old]]],
      ]
      for (const [name, values] of attempts) {
        const { rows } = await db.pool.query(sqlFor(name, s), values)
        const changed = name === 'release-jobs' ? (rows[0] as { count: number }).count : rows.length
        expect(changed, `${name} with a stale token`).toBe(0)
      }
      expect(await snapshot()).toEqual(before)
      // The current token still works.
      const { rows } = await db.pool.query(sqlFor('complete-jobs', s), [[job.id], [current], ['{"ok":true}']])
      expect(rows).toHaveLength(1)
    } finally {
      await queue.close()
    }
  })
})
