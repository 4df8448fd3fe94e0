// Retention: housekeeping prunes finished jobs past their queue's period (settings in Postgres, defaults for queues
// never configured), in bounded batches, and never a job that still matters: the owner of a held TTL key, a parent a
// live dependent waits on, a live job, or the newest terminal generation of a jobId while an older one remains.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, Queue, runMaintenance } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('ops_retention')
})
afterAll(async () => {
  await db.drop()
})

const HOUR = 3_600_000
const queueOf = (name: string) => new Queue(name, { connectionString: db.url, schema: db.schema, migrate: false })

/** Ends job `id` in `state`, `hoursAgo` hours ago by the database clock (the jobs_finished trigger runs as usual). */
async function finish(id: string, state: 'completed' | 'failed' | 'cancelled', hoursAgo: number): Promise<void> {
  await db.pool.query(
    `update "${db.schema}".jobs set state = $2, finished_at = now() - $3::float8 * interval '1 hour' where id = $1`,
    [id, state, hoursAgo],
  )
}

async function ids(queue: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>(
    `select id::text from "${db.schema}".jobs where queue = $1 order by id`,
    [queue],
  )
  return rows.map((r) => r.id)
}

describe('retention', () => {
  it('by default keeps completed and cancelled jobs 24 h and failed ones 7 days; prunes exactly those past it, never a live job', async () => {
    const q = queueOf('ret-default')
    try {
      const jobs = await q.addBulk(Array.from({ length: 8 }, (_, i) => ({ name: 'j', data: { i } })))
      const [c23, c25, x25, f6d, f8d, live, , activeOld] = jobs.map<string>((j) => j.id)
      await finish(c23!, 'completed', 23)
      await finish(c25!, 'completed', 25)
      await finish(x25!, 'cancelled', 25)
      await finish(f6d!, 'failed', 6 * 24)
      await finish(f8d!, 'failed', 8 * 24)
      await db.pool.query(
        `update "${db.schema}".jobs set state = 'active', finished_at = now() - interval '30 days' where id = $1`,
        [activeOld],
      )
      const r = await runMaintenance({ pool: db.pool, schema: db.schema })
      expect(r.pruned).toBe(3)
      expect(await ids('ret-default')).toEqual([c23, f6d, live, jobs[6]!.id, activeOld])
    } finally {
      await q.close()
    }
  })

  it('setRetention is per queue, stored in Postgres, read back with defaults filled in; null returns a setting to its default', async () => {
    const a = queueOf('ret-a')
    const b = queueOf('ret-b')
    try {
      expect(await a.getRetention()).toEqual({ completedMs: 24 * HOUR, failedMs: 7 * 24 * HOUR, maxCompleted: null })
      await a.setRetention({ completedMs: HOUR, failedMs: 2 * HOUR })
      // Another process sees the same setting.
      const again = queueOf('ret-a')
      expect(await again.getRetention()).toEqual({ completedMs: HOUR, failedMs: 2 * HOUR, maxCompleted: null })
      await again.close()
      const [a1, a2, a3] = (await a.addBulk([1, 2, 3].map((i) => ({ name: 'j', data: { i } })))).map((j) => j.id)
      const [b1] = (await b.addBulk([{ name: 'j', data: {} }])).map((j) => j.id)
      await finish(a1!, 'completed', 2)
      await finish(a2!, 'failed', 1.5)
      await finish(a3!, 'failed', 3)
      await finish(b1!, 'completed', 2)
      await runMaintenance({ pool: db.pool, schema: db.schema })
      expect(await ids('ret-a')).toEqual([a2])
      expect(await ids('ret-b')).toEqual([b1])
      await a.setRetention({ completedMs: null })
      expect(await a.getRetention()).toEqual({ completedMs: 24 * HOUR, failedMs: 2 * HOUR, maxCompleted: null })
    } finally {
      await a.close()
      await b.close()
    }
  })

  it('maxCompleted keeps only the newest N completed jobs of a queue', async () => {
    const q = queueOf('ret-cap')
    try {
      await q.setRetention({ maxCompleted: 2 })
      const jobs = (await q.addBulk([1, 2, 3, 4, 5].map((i) => ({ name: 'j', data: { i } })))).map((j) => j.id)
      for (let i = 0; i < jobs.length; i++) await finish(jobs[i]!, 'completed', 5 - i)
      await runMaintenance({ pool: db.pool, schema: db.schema })
      expect(await ids('ret-cap')).toEqual(jobs.slice(3))
    } finally {
      await q.close()
    }
  })

  it('never prunes the owner of a TTL key still held, a parent a live dependent waits on, or a generation whose jobId has an older terminal one', async () => {
    const q = queueOf('ret-keep')
    try {
      await q.setRetention({ completedMs: HOUR, failedMs: HOUR })
      const owner = await q.add('owner', {}, { deduplication: { id: 'notify:1', ttl: 48 * HOUR } })
      await finish(owner.id, 'completed', 2)
      const parent = await q.add('parent', {})
      const child = await q.add('child', {}, { dependsOn: [parent.id] })
      await db.pool.query(`update "${db.schema}".jobs set state = 'active' where id = $1`, [parent.id])
      await db.pool.query(
        `update "${db.schema}".jobs set finished_at = now() - interval '2 hours', state = 'failed' where id = $1`,
        [parent.id],
      )
      // The parent failed: its waiting dependent failed with it, and both may go. A parent with a live dependent may not:
      const parent2 = await q.add('parent2', {})
      await finish(parent2.id, 'completed', 2)
      const child2 = await q.add('child2', {}, { dependsOn: [parent2.id] })
      const g1 = await q.add('gen', { g: 1 }, { jobId: 'gen' })
      await finish(g1.id, 'failed', 0.5)
      const g2 = await q.add('gen', { g: 2 }, { jobId: 'gen' })
      await finish(g2.id, 'completed', 2)
      await runMaintenance({ pool: db.pool, schema: db.schema })
      const left = await ids('ret-keep')
      expect(left).toContain(owner.id)
      expect(await q.add('owner', {}, { deduplication: { id: 'notify:1', ttl: 48 * HOUR } })).toMatchObject({
        id: owner.id,
        outcome: 'duplicate-key',
      })
      expect(left).not.toContain(parent.id)
      // Its dependent failed with it just now: kept for the failed period.
      expect(left).toContain(child.id)
      expect(left).toContain(parent2.id)
      expect(left).toContain(child2.id)
      // g2 is newer than g1 but must wait for it: getJobByCustomId answers with the newest terminal generation.
      expect(left).toEqual(expect.arrayContaining([g1.id, g2.id]))
      expect((await q.getJobByCustomId('gen'))?.id).toBe(g2.id)
      // Once the key expires and the dependent is gone, they go too.
      await db.pool.query(
        `update "${db.schema}".dedup_keys set expires_at = now() - interval '1 second' where key = 'notify:1'`,
      )
      await finish(child2.id, 'completed', 2)
      await finish(child.id, 'failed', 2)
      await finish(g1.id, 'failed', 2)
      await runMaintenance({ pool: db.pool, schema: db.schema })
      // g2 waited for g1 (completed jobs are pruned before failed ones): it goes at the next round.
      expect(await ids('ret-keep')).toEqual([g2.id])
      await runMaintenance({ pool: db.pool, schema: db.schema })
      expect(await ids('ret-keep')).toEqual([])
      const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".job_dependencies`)
      expect(rows[0].n).toBe(0)
    } finally {
      await q.close()
    }
  })

  it('prunes thousands in bounded batches (batchSize per statement, as many statements as it takes)', async () => {
    const q = queueOf('ret-batch')
    try {
      await db.pool.query(`insert into "${db.schema}".jobs (queue, name, data, state, finished_at)
        select 'ret-batch', 'j', '{}', 'completed', now() - interval '2 days' from generate_series(1, 2500)`)
      const r = await runMaintenance({ pool: db.pool, schema: db.schema, batchSize: 1000 })
      expect(r.pruned).toBeGreaterThanOrEqual(2500)
      expect(await ids('ret-batch')).toEqual([])
    } finally {
      await q.close()
    }
  })

  it('keeps the effects ledger forever by default; setLedgerRetention prunes older rows, null keeps them again', async () => {
    const effects = new Effects({ connectionString: db.url, schema: db.schema, migrate: false })
    try {
      const client = await db.pool.connect()
      try {
        for (const key of ['old-effect', 'new-effect']) await effects.record(client, key)
      } finally {
        client.release()
      }
      await db.pool.query(
        `update "${db.schema}".processed_effects set recorded_at = now() - interval '40 days' where effect_key = 'old-effect'`,
      )
      expect((await runMaintenance({ pool: db.pool, schema: db.schema })).prunedEffects).toBe(0)
      // inside a transaction that rolls back: nothing set, nothing pruned
      const tx = await db.pool.connect()
      try {
        await tx.query('begin')
        await effects.setLedgerRetention(30 * 24 * HOUR, { tx })
        await tx.query('rollback')
      } finally {
        tx.release()
      }
      expect((await runMaintenance({ pool: db.pool, schema: db.schema })).prunedEffects).toBe(0)
      await effects.setLedgerRetention(30 * 24 * HOUR)
      expect((await runMaintenance({ pool: db.pool, schema: db.schema })).prunedEffects).toBe(1)
      const { rows } = await db.pool.query(`select effect_key from "${db.schema}".processed_effects order by 1`)
      expect(rows.map((r) => r.effect_key)).toEqual(['new-effect'])
      await effects.setLedgerRetention(null)
      await db.pool.query(`update "${db.schema}".processed_effects set recorded_at = now() - interval '400 days'`)
      expect((await runMaintenance({ pool: db.pool, schema: db.schema })).prunedEffects).toBe(0)
    } finally {
      await effects.close()
    }
  })

  it('rejects bad settings before any I/O', async () => {
    const q = queueOf('ret-bad')
    try {
      await expect(q.setRetention({ completedMs: -1 })).rejects.toMatchObject({
        name: 'ValidationError',
        field: 'settings.completedMs',
      })
      await expect(q.setRetention({ failedMs: 1.5 })).rejects.toMatchObject({
        name: 'ValidationError',
        field: 'settings.failedMs',
      })
      await expect(q.setRetention({ keep: 3 } as never)).rejects.toMatchObject({
        name: 'ValidationError',
        code: 'UNKNOWN_OPTION',
      })
      await expect(q.setRetention(undefined as never)).rejects.toMatchObject({
        name: 'ValidationError',
        field: 'settings',
      })
    } finally {
      await q.close()
    }
  })
})
