// A batch worker SIGKILLed mid-batch: every job of the batch runs again once (attempt 2) in one new batch, the effects
// recorded before the kill are skipped, and no job is completed twice.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { exited, spawnFixture } from './helpers/processes.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_batch_kill')
  await db.pool.query(`create table "${db.schema}".batches (pid int not null, job_ids bigint[] not null)`)
  await db.pool.query(
    `create table "${db.schema}".sent (i int not null, job_id bigint not null, pid int not null, at timestamptz not null default clock_timestamp())`,
  )
})
afterAll(async () => {
  await db.drop()
})

const SIZE = 10

describe('a batch worker killed mid-batch', () => {
  it('reruns each job of the batch once; effects recorded before the kill are not repeated', async () => {
    const queue = new Queue<{ i: number }>('batch-kill', {
      connectionString: db.url,
      schema: db.schema,
      migrate: false,
    })
    const added = await queue.addBulk(
      Array.from({ length: SIZE }, (_, i) => ({ name: 'send', data: { i }, opts: { attempts: 3 } })),
    )
    const child = spawnFixture('batch-worker-child.ts', {
      PGONCE_URL: db.url,
      PGONCE_SCHEMA: db.schema,
      QUEUE: 'batch-kill',
      BATCH_SIZE: String(SIZE),
      LEASE_MS: '1500',
    })
    let survivor: Worker<{ i: number }> | undefined
    try {
      // The batch started and half of its effects are recorded; the child now hangs mid-batch.
      await waitFor(
        async () =>
          (await db.pool.query(`select 1 from "${db.schema}".sent where pid = $1`, [child.pid])).rows.length ===
          SIZE / 2,
        60_000,
        'the child to record half of its batch',
      )
      const { rows: batches } = await db.pool.query<{ job_ids: string[] }>(`select job_ids from "${db.schema}".batches`)
      expect(batches.map((b) => [...b.job_ids].sort())).toEqual([added.map((j) => j.id).sort()])
      const { rows: held } = await db.pool.query<{ state: string; attempts: number }>(
        `select state, attempts from "${db.schema}".jobs where queue = 'batch-kill'`,
      )
      expect(held).toEqual(Array.from({ length: SIZE }, () => ({ state: 'active', attempts: 1 })))
      const { rows: sentBefore } = await db.pool.query<{ i: number }>(`select i from "${db.schema}".sent`)
      const recordedBefore = new Set(sentBefore.map((r) => r.i))
      child.kill('SIGKILL')
      expect(await exited(child)).toBe('SIGKILL')

      const runs = new Map<string, number>()
      const outcomes = new Map<number, string>()
      const completed: string[] = []
      survivor = new Worker<{ i: number }>(
        'batch-kill',
        async (jobs, ctx) => {
          for (const job of jobs) runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
          return Promise.all(
            jobs.map(async (job) => {
              const outcome = await ctx
                .for(job)
                .effect(`send:${job.data.i}`, (tx) =>
                  tx.query(`insert into "${db.schema}".sent (i, job_id, pid) values ($1, $2, 0)`, [job.data.i, job.id]),
                )
              outcomes.set(job.data.i, outcome)
              return outcome
            }),
          )
        },
        {
          connectionString: db.url,
          schema: db.schema,
          batch: { size: SIZE },
          leaseMs: 1500,
          maintenanceIntervalMs: 200,
          pollIntervalMs: 200,
          poolSize: 4,
          migrate: false,
        },
      )
      survivor.on('completed', (job) => completed.push(job.id))
      await waitFor(
        async () =>
          (await db.pool.query(`select 1 from "${db.schema}".jobs where queue = 'batch-kill' and state = 'completed'`))
            .rows.length === SIZE,
        30_000,
        'every job of the batch to complete',
      )
      const { rows: jobs } = await db.pool.query<{ id: string; i: number; attempts: number; result: string }>(
        `select id, (data->>'i')::int as i, attempts, result from "${db.schema}".jobs where queue = 'batch-kill'`,
      )
      for (const job of jobs) {
        const before = recordedBefore.has(job.i)
        expect({ i: job.i, attempts: job.attempts, result: job.result, runs: runs.get(job.id) }).toEqual({
          i: job.i,
          attempts: 2,
          result: before ? 'duplicate-done' : 'ran',
          runs: 1,
        })
      }
      const { rows: sent } = await db.pool.query<{ i: number; n: number }>(
        `select i, count(*)::int as n from "${db.schema}".sent group by i order by i`,
      )
      expect(sent).toEqual(Array.from({ length: SIZE }, (_, i) => ({ i, n: 1 })))
      expect([...completed].sort()).toEqual(added.map((j) => j.id).sort())
    } finally {
      child.kill('SIGKILL')
      await survivor?.close()
      await queue.close()
    }
  }, 90_000)
})
