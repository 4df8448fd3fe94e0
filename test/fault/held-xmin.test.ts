// Fault suite, a held xmin horizon: an open REPEATABLE READ transaction that ran a query (so its snapshot keeps every
// row version since then from being vacuumed) while jobs are added and processed for 12 s (by the database clock;
// bench/held-xmin.ts holds it 60 s and measures the throughput). Guarantee: correct all along: every add answered
// with a stored job, one live job per jobId and per key, each job handled and completed once; the held snapshot
// really held (backend_xmin unchanged) and saw none of it.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../../src/index.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'
import { backendPid, connectClient, releaseClient } from '../helpers/clients.js'
import { waitFor } from '../helpers/wait.js'

const HOLD_MS = 12_000

let db: TestSchema
let holder: pg.Client

beforeAll(async () => {
  db = await freshSchema('fault_xmin')
  await db.pool.query(`create table "${db.schema}".handled (job_id bigint not null)`)
  holder = await connectClient(db.url)
})
afterAll(async () => {
  await releaseClient(holder)
  await db?.drop()
})

describe('a held xmin horizon', () => {
  it(`adds and processing stay correct while a REPEATABLE READ snapshot is held for ${HOLD_MS / 1000} s`, async () => {
    const queue = new Queue('xmin', { connectionString: db.url, schema: db.schema, migrate: false })
    const worker = new Worker(
      'xmin',
      async (job, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query(`insert into "${db.schema}".handled (job_id) values ($1)`, [job.id])
        }),
      {
        connectionString: db.url,
        schema: db.schema,
        concurrency: 8,
        pollIntervalMs: 200,
        maintenanceIntervalMs: 1_000,
        migrate: false,
      },
    )
    const errors: Error[] = []
    worker.on('error', (err) => errors.push(err))
    try {
      await holder.query('begin isolation level repeatable read')
      const {
        rows: [seen],
      } = await holder.query<{ n: number; started: Date }>(
        `select count(*)::int as n, now() as started from "${db.schema}".jobs`,
      )
      const {
        rows: [pinned],
      } = await db.pool.query<{ xmin: string }>(
        'select backend_xmin::text as xmin from pg_stat_activity where pid = $1',
        [backendPid(holder)],
      )
      expect(pinned!.xmin).not.toBeNull()

      const answers: { id: string; jobId?: string; key?: string; outcome: string }[] = []
      for (let i = 0; ; i++) {
        const {
          rows: [clock],
        } = await db.pool.query<{ ms: number }>(
          'select (extract(epoch from clock_timestamp() - $1::timestamptz) * 1000)::float8 as ms',
          [seen!.started],
        )
        if (clock!.ms >= HOLD_MS) break
        const jobId = `x-${i % 40}`
        const key = `k-${i % 40}`
        const [a, b] = await Promise.all([
          queue.add('j', { i }, { jobId }),
          queue.add('k', { i }, { deduplication: { id: key } }),
        ])
        answers.push({ id: a.id, jobId, outcome: a.outcome as string }, { id: b.id, key, outcome: b.outcome as string })
        if (i % 10 === 0) {
          for (const j of await queue.addBulk(
            Array.from({ length: 20 }, (_, n) => ({ name: 'plain', data: { i, n } })),
          )) {
            answers.push({ id: j.id, outcome: j.outcome as string })
          }
        }
      }
      // The snapshot held all along, and saw nothing of what was added since.
      const {
        rows: [still],
      } = await db.pool.query<{ xmin: string }>(
        'select backend_xmin::text as xmin from pg_stat_activity where pid = $1',
        [backendPid(holder)],
      )
      expect(still!.xmin).toBe(pinned!.xmin)
      expect((await holder.query<{ n: number }>(`select count(*)::int as n from "${db.schema}".jobs`)).rows[0]!.n).toBe(
        seen!.n,
      )
      // Work went on under the held horizon (each generation of the 40 jobIds and keys ended and was replaced).
      const {
        rows: [during],
      } = await db.pool.query<{ n: number }>(
        `select count(*)::int as n from "${db.schema}".jobs where state = 'completed'`,
      )
      expect(during!.n).toBeGreaterThan(200)
      await holder.query('commit')

      const ids = [...new Set(answers.map((a) => a.id))]
      await waitFor(
        async () =>
          (
            await db.pool.query<{ n: number }>(
              `select count(*)::int as n from "${db.schema}".jobs where id = any($1) and state = 'completed'`,
              [ids],
            )
          ).rows[0]!.n === ids.length,
        30_000,
        `all ${ids.length} answered jobs to complete`,
      )
      const {
        rows: [tally],
      } = await db.pool.query<{ stored: number; once: number; handled: number }>(
        `select (select count(*)::int from "${db.schema}".jobs where id = any($1)) as stored,
                (select count(*)::int from (select job_id from "${db.schema}".handled group by 1 having count(*) = 1) h) as once,
                (select count(*)::int from "${db.schema}".handled) as handled`,
        [ids],
      )
      expect(tally).toEqual({ stored: ids.length, once: ids.length, handled: ids.length })
      // Each answer is right: a duplicate named the live generation that was added before it, and no jobId or key
      // had two live jobs at once (the generations of one jobId never overlap in time).
      const { rows: overlap } = await db.pool.query(
        `select a.job_id from "${db.schema}".jobs a join "${db.schema}".jobs b on a.job_id = b.job_id and a.id < b.id
         where a.job_id like 'x-%' and b.created_at < a.finished_at`,
      )
      expect(overlap).toEqual([])
      const { rows: keyOverlap } = await db.pool.query(
        `select a.dedup_key from "${db.schema}".jobs a join "${db.schema}".jobs b on a.dedup_key = b.dedup_key and a.id < b.id
         where a.dedup_key like 'k-%' and b.created_at < a.finished_at`,
      )
      expect(keyOverlap).toEqual([])
      expect(
        answers.filter((a) => a.jobId !== undefined && a.outcome !== 'added' && a.outcome !== 'duplicate-job-id'),
      ).toEqual([])
      expect(errors).toEqual([])
    } finally {
      await holder.query('rollback').catch(() => {})
      await worker.close()
      await queue.close()
    }
  }, 60_000)
})
