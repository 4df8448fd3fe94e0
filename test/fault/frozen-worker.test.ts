// Fault suite, a frozen worker: a process stopped (SIGSTOP: a long garbage collection, a paused VM) past the lease of a
// job it claimed and had not started, the job rescued and run by another worker meanwhile, then resumed (SIGCONT). The
// resumed worker must not start a handler for that job: by its own monotonic clock the lease may have run out, so it
// renews it first, fenced by the token, finds it taken over and drops the job. The claim's answer waits in the stopped
// process's socket: the claim is held back by a table lock of the test until the process is stopped.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker, runMaintenance } from '../../src/index.js'
import { type TestSchema, freshSchema, namedSessionUrl } from '../helpers/schema.js'
import { type Child, exited, spawnFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('fault_frozen')
  await db.pool.query(
    `create table "${db.schema}".handled (job_id bigint not null, pid int not null, attempt int not null)`,
  )
})
afterAll(async () => {
  await db?.drop()
})

describe('a worker stopped past its lease and resumed', () => {
  it('never starts the handler of a job it claimed before it stopped, once another worker took it over', async () => {
    const queue = new Queue('frozen', { connectionString: db.url, schema: db.schema, migrate: false })
    const job = await queue.add('j', {})
    const locker = new pg.Client({ connectionString: db.url })
    await locker.connect()
    let child: Child | undefined
    let rescuer: Worker | undefined
    try {
      await locker.query('begin')
      await locker.query(`lock table "${db.schema}".jobs in exclusive mode`)
      child = spawnFixture('worker-child.ts', {
        PGONCE_URL: namedSessionUrl(db.url, 'frozen-child'),
        PGONCE_SCHEMA: db.schema,
        QUEUE: 'frozen',
        CONCURRENCY: '1',
        BATCH: '1',
        LEASE_MS: '1000',
        MAINTENANCE_MS: '0',
        POLL_MS: '60000',
      })
      await waitFor(
        async () =>
          (
            await db.pool.query(`select 1 from pg_stat_activity
        where application_name = 'frozen-child' and wait_event_type = 'Lock'`)
          ).rowCount === 1,
        30_000,
        "the child's claim to wait for the lock",
      )
      child.kill('SIGSTOP')
      await locker.query('commit')
      // The claim commits; its answer sits unread in the stopped process's socket.
      await waitFor(
        async () =>
          (await db.pool.query(`select 1 from "${db.schema}".jobs where id = $1 and state = 'active'`, [job.id]))
            .rowCount === 1,
        10_000,
        'the claim to commit',
      )
      await waitFor(
        async () =>
          (await db.pool.query(`select 1 from "${db.schema}".jobs where id = $1 and locked_until < now()`, [job.id]))
            .rowCount === 1,
        10_000,
        'the lease to expire on the database clock',
      )
      expect((await runMaintenance({ pool: db.pool, schema: db.schema })).rescued).toBe(1)

      rescuer = new Worker(
        'frozen',
        async (j) => {
          await db.pool.query(`insert into "${db.schema}".handled (job_id, pid, attempt) values ($1, $2, $3)`, [
            j.id,
            process.pid,
            j.attempts,
          ])
        },
        { connectionString: db.url, schema: db.schema, maintenanceIntervalMs: 0, migrate: false },
      )
      await waitFor(
        async () =>
          (await db.pool.query(`select 1 from "${db.schema}".jobs where id = $1 and state = 'completed'`, [job.id]))
            .rowCount === 1,
        10_000,
        'the rescuer to run the job',
      )
      await rescuer.close()

      child.kill('SIGCONT')
      await waitFor(
        () => child?.output().includes(`lease of job ${job.id} was lost`),
        10_000,
        'the resumed child to find the lease lost',
      )
      const { rows } = await db.pool.query(`select pid, attempt from "${db.schema}".handled where job_id = $1`, [
        job.id,
      ])
      expect(rows).toEqual([{ pid: process.pid, attempt: 2 }])
      expect(
        (await db.pool.query(`select state, attempts from "${db.schema}".jobs where id = $1`, [job.id])).rows,
      ).toEqual([{ state: 'completed', attempts: 2 }])
    } finally {
      await locker.query('rollback').catch(() => {})
      await locker.end()
      await rescuer?.close()
      if (child !== undefined) {
        child.kill('SIGCONT')
        child.kill('SIGKILL')
        await exited(child)
      }
      await queue.close()
    }
  }, 60_000)
})
