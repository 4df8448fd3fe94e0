// A worker process killed with SIGKILL mid-job: after its lease expires, housekeeping rescues the job (attempt counted) and it runs again and completes.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { exited, spawnFixture } from './helpers/processes.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_crash')
  await db.pool.query(
    `create table "${db.schema}".handled (job_id bigint not null, pid int not null, attempt int not null)`,
  )
})
afterAll(async () => {
  await db.drop()
})

describe('a worker killed mid-job', () => {
  it('loses the job after leaseMs; another worker rescues it, runs it again and completes it', async () => {
    const queue = new Queue('crash', { connectionString: db.url, schema: db.schema, migrate: false })
    const job = await queue.add('victim', {}, { attempts: 3 })
    const child = spawnFixture('worker-child.ts', {
      PGONCE_URL: db.url,
      PGONCE_SCHEMA: db.schema,
      QUEUE: 'crash',
      MODE: 'hang-first',
      LEASE_MS: '1500',
      MAINTENANCE_MS: '0',
    })
    let survivor: Worker | undefined
    try {
      await waitFor(
        async () => {
          const { rows } = await db.pool.query(`select 1 from "${db.schema}".handled where job_id = $1`, [job.id])
          return rows.length === 1
        },
        60_000,
        'the child to start the job',
      )
      const held = await storedJob(db, job.id)
      expect(held).toMatchObject({ state: 'active', attempts: 1 })
      child.kill('SIGKILL')
      expect(await exited(child)).toBe('SIGKILL')

      const killedAt = (await db.pool.query<{ now: Date }>('select now()')).rows[0]!.now
      let secondStart: Date | undefined
      survivor = new Worker(
        'crash',
        async () => {
          const { rows } = await db.pool.query<{ now: Date }>('select clock_timestamp() as now')
          secondStart = rows[0]!.now
          return 'recovered'
        },
        {
          connectionString: db.url,
          schema: db.schema,
          leaseMs: 1500,
          maintenanceIntervalMs: 200,
          pollIntervalMs: 200,
          migrate: false,
        },
      )

      const done = await waitForState(db, job.id, 'completed', 20_000)
      expect(done).toMatchObject({ attempts: 2, result: 'recovered' })
      expect(done.last_error).toMatch(/lease expired/)
      // Not before the dead worker's lease ran out, and not long after it (seconds, not hours).
      expect(secondStart!.getTime()).toBeGreaterThanOrEqual(held.locked_until!.getTime())
      expect(secondStart!.getTime() - killedAt.getTime()).toBeLessThan(10_000)
    } finally {
      child.kill('SIGKILL')
      await survivor?.close()
      await queue.close()
    }
  }, 60_000)
})
