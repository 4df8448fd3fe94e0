// jobId idempotency (docs/deduplication.md#jobid-idempotent-adds): one live generation per jobId across queues, new generations after terminal.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('job_id')
})
afterAll(async () => {
  await db.drop()
})

async function rowsOf(jobId: string): Promise<{ id: string; queue: string; state: string; data: unknown }[]> {
  const { rows } = await db.pool.query(
    `select id, queue, state, data from "${db.schema}".jobs where job_id = $1 order by id`,
    [jobId],
  )
  return rows
}

describe('jobId', () => {
  it('50 concurrent adds of one jobId from 50 separate pools make one row and 50 equal ids', async () => {
    const queues = Array.from(
      { length: 50 },
      () =>
        new Queue<{ caller: number }>('race', {
          connectionString: db.url,
          schema: db.schema,
          poolSize: 1,
          migrate: false,
        }),
    )
    try {
      // Open every connection first so that the adds really overlap.
      await Promise.all(queues.map((q) => q.getJobCounts()))
      const jobs = await Promise.all(queues.map((q, i) => q.add('race', { caller: i }, { jobId: 'race-1' })))

      const rows = await rowsOf('race-1')
      expect(rows).toHaveLength(1)
      const row = rows[0] as { id: string; data: unknown }
      expect(new Set(jobs.map((j) => j.id))).toEqual(new Set([row.id]))
      const winners = jobs.filter((j) => j.deduplicated === false)
      expect(winners).toHaveLength(1)
      expect(winners[0]?.outcome).toBe('added')
      const losers = jobs.filter((j) => j.deduplicated === true)
      expect(losers).toHaveLength(49)
      for (const j of losers) {
        expect(j.outcome).toBe('duplicate-job-id')
        expect(j.data).toEqual(row.data)
      }
      expect(winners[0]?.data).toEqual(row.data)
    } finally {
      await Promise.all(queues.map((q) => q.close()))
    }
  })

  it("one jobId in two queues while live gives one job: the second add returns the first queue's job", async () => {
    const a = new Queue('alpha', { connectionString: db.url, schema: db.schema })
    const b = new Queue('beta', { connectionString: db.url, schema: db.schema })
    try {
      const first = await a.add('send', { from: 'alpha' }, { jobId: 'shared-1' })
      const second = await b.add('send', { from: 'beta' }, { jobId: 'shared-1' })
      expect(first.outcome).toBe('added')
      expect(second).toMatchObject({
        id: first.id,
        queue: 'alpha',
        data: { from: 'alpha' },
        deduplicated: true,
        outcome: 'duplicate-job-id',
      })
      expect(await rowsOf('shared-1')).toEqual([
        { id: first.id, queue: 'alpha', state: 'waiting', data: { from: 'alpha' } },
      ])
      const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where queue = 'beta'`)
      expect(rows[0].n).toBe(0)
    } finally {
      await a.close()
      await b.close()
    }
  })

  it('every live state holds the jobId', async () => {
    const q = new Queue('states', { connectionString: db.url, schema: db.schema })
    try {
      for (const state of ['waiting', 'delayed', 'waiting-children', 'active']) {
        const jobId = `held-by-${state}`
        const first = await q.add('x', { n: 1 }, { jobId })
        await db.pool.query(`update "${db.schema}".jobs set state = $2 where id = $1`, [first.id, state])
        const again = await q.add('x', { n: 2 }, { jobId })
        expect(again).toMatchObject({ id: first.id, state, outcome: 'duplicate-job-id', data: { n: 1 } })
        expect(await rowsOf(jobId)).toHaveLength(1)
      }
    } finally {
      await q.close()
    }
  })

  it('after the job is terminal a re-add starts a new generation; getJobByCustomId prefers the live one, then the newest terminal', async () => {
    const q = new Queue('gens', { connectionString: db.url, schema: db.schema })
    const other = new Queue('gens-other', { connectionString: db.url, schema: db.schema })
    const finish = (id: string, state: string) =>
      db.pool.query(`update "${db.schema}".jobs set state = $2, finished_at = now() where id = $1`, [id, state])
    try {
      const g1 = await q.add('x', { gen: 1 }, { jobId: 'gen-1' })
      expect(await q.getJobByCustomId('gen-1')).toMatchObject({ id: g1.id, state: 'waiting', data: { gen: 1 } })
      await finish(g1.id, 'completed')

      const g2 = await q.add('x', { gen: 2 }, { jobId: 'gen-1' })
      expect(g2).toMatchObject({ deduplicated: false, outcome: 'added', data: { gen: 2 }, state: 'waiting' })
      expect(g2.id).not.toBe(g1.id)
      expect(await rowsOf('gen-1')).toEqual([
        { id: g1.id, queue: 'gens', state: 'completed', data: { gen: 1 } },
        { id: g2.id, queue: 'gens', state: 'waiting', data: { gen: 2 } },
      ])
      // The live generation answers, whichever queue asks.
      expect((await q.getJobByCustomId('gen-1'))?.id).toBe(g2.id)
      expect((await other.getJobByCustomId('gen-1'))?.id).toBe(g2.id)
      const dup = await other.add('x', { gen: 99 }, { jobId: 'gen-1' })
      expect(dup).toMatchObject({ id: g2.id, outcome: 'duplicate-job-id', data: { gen: 2 } })

      await finish(g2.id, 'failed')
      expect(await q.getJobByCustomId('gen-1')).toMatchObject({ id: g2.id, state: 'failed', data: { gen: 2 } })

      const g3 = await other.add('x', { gen: 3 }, { jobId: 'gen-1' })
      expect(g3).toMatchObject({ outcome: 'added', queue: 'gens-other' })
      expect(new Set([g1.id, g2.id, g3.id]).size).toBe(3)
      expect((await q.getJobByCustomId('gen-1'))?.id).toBe(g3.id)
      await finish(g3.id, 'completed')
      expect((await q.getJobByCustomId('gen-1'))?.id).toBe(g3.id)
      expect(await rowsOf('gen-1')).toHaveLength(3)
      expect(await q.getJobByCustomId('never-added')).toBeNull()
    } finally {
      await q.close()
      await other.close()
    }
  })

  it('an add racing the live generation going terminal answers with a job, never nothing', async () => {
    // One connection flips the live generation to completed while many adds arrive:
    // each add returns either that generation or the (single) next one.
    const q = new Queue('flip', { connectionString: db.url, schema: db.schema, poolSize: 8 })
    const flipper = new pg.Client({ connectionString: db.url })
    await flipper.connect()
    try {
      for (let round = 0; round < 5; round++) {
        const jobId = `flip-${round}`
        const first = await q.add('x', { round }, { jobId })
        const adds = Promise.all(Array.from({ length: 16 }, () => q.add('x', { round, late: true }, { jobId })))
        await flipper.query(`update "${db.schema}".jobs set state = 'completed' where id = $1`, [first.id])
        const jobs = await adds
        const rows = await rowsOf(jobId)
        const ids = rows.map((r) => r.id)
        expect(rows.filter((r) => r.state === 'waiting').length).toBeLessThanOrEqual(1)
        expect(rows.length).toBeLessThanOrEqual(2)
        for (const j of jobs) expect(ids).toContain(j.id)
        expect(jobs.filter((j) => j.outcome === 'added')).toHaveLength(rows.length - 1)
      }
    } finally {
      await flipper.end()
      await q.close()
    }
  })
})
