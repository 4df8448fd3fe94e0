// Exactly once across processes: 1,000 jobs through 3 worker processes, each job handled once and completed once.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { exited, spawnFixture } from './helpers/processes.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_once')
  await db.pool.query(
    `create table "${db.schema}".handled (job_id bigint not null, pid int not null, attempt int not null)`,
  )
})
afterAll(async () => {
  await db.drop()
})

describe('3 worker processes', () => {
  it('handle each of 1,000 jobs exactly once', async () => {
    const queue = new Queue<{ n: number }>('once', { connectionString: db.url, schema: db.schema, migrate: false })
    const env = { PGONCE_URL: db.url, PGONCE_SCHEMA: db.schema, QUEUE: 'once', CONCURRENCY: '8', BATCH: '16' }
    const children = [0, 1, 2].map(() => spawnFixture('worker-child.ts', env))
    try {
      // Start adding while the workers start, in bulk and one by one, so that claims race with adds.
      await waitFor(() => children.every((c) => c.output().includes('ready')), 60_000, 'the workers to start')
      const ids: string[] = []
      for (let b = 0; b < 9; b++) {
        const jobs = await queue.addBulk(
          Array.from({ length: 100 }, (_, i) => ({ name: 'n', data: { n: b * 100 + i } })),
        )
        ids.push(...jobs.map((j) => j.id))
      }
      for (let i = 900; i < 1000; i++) ids.push((await queue.add('n', { n: i })).id)
      expect(new Set(ids).size).toBe(1000)

      await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            `select count(*)::int as n from "${db.schema}".jobs where queue = 'once' and state = 'completed'`,
          )
          return rows[0]!.n === 1000
        },
        60_000,
        'all 1,000 jobs to complete',
      )

      const { rows: dupes } = await db.pool.query(
        `select job_id, count(*) from "${db.schema}".handled group by job_id having count(*) <> 1`,
      )
      expect(dupes).toEqual([])
      const {
        rows: [counts],
      } = await db.pool.query<{ handled: number; jobs: number; pids: number }>(
        `select count(*)::int as handled, count(distinct job_id)::int as jobs, count(distinct pid)::int as pids from "${db.schema}".handled`,
      )
      expect(counts).toEqual({ handled: 1000, jobs: 1000, pids: 3 })
      const {
        rows: [attempts],
      } = await db.pool.query<{ n: number }>(
        `select count(*)::int as n from "${db.schema}".jobs where queue = 'once' and (attempts <> 1 or result is null)`,
      )
      expect(attempts!.n).toBe(0)
    } finally {
      for (const c of children) c.kill('SIGTERM')
      const codes = await Promise.all(children.map(exited))
      expect(codes).toEqual([0, 0, 0])
      await queue.close()
    }
  }, 120_000)
})
