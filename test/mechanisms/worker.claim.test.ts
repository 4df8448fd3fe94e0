// The claim statement: the jobs it takes come back active (run counted, started), in fetch order and from the worker's
// cursor. It commits without waiting for the WAL flush (synchronous_commit off for its own transaction only), and the
// setting never outlives it on a pooled connection. Its lock tokens (a part the worker chose per claim, the job id for
// the rest) must still fence: distinct jobs, distinct tokens; a re-claim, a new token. And a claim whose answer was
// lost is given back by that part alone (sql/release-lost-claim.sql).

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../../src/index.js'
import { sqlFor } from '../../src/db/sql-files.js'
import { newTokenPrefix } from '../../src/worker/job-store.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('claim_commit')
})
afterAll(async () => {
  await db.drop()
})

const HEAD = [-2147483648, '-100000000000000000', '0'] as const

/** sql/claim-jobs.sql's parameters: queue, limit, lease, worker, the tokens' first part, the cursor, no default timeout. */
const claimArgs = (queue: string, limit: number, cursor: readonly unknown[] = HEAD, prefix = newTokenPrefix()) => [
  queue,
  limit,
  30_000,
  'w',
  prefix,
  ...cursor,
  null,
]

describe('claim-jobs', () => {
  it('starts every job it takes (active, run counted), in fetch order; the rest stay waiting', async () => {
    const queue = new Queue('split', { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      const added = await queue.addBulk(
        [3, 1, 2, 0, 1].map((priority, i) => ({ name: 'j', data: { i }, opts: { priority } })),
      )
      const { rows } = await db.pool.query<{ id: string; state: string; attempts: number; priority: number }>(
        sqlFor('claim-jobs', db.schema),
        claimArgs('split', 4),
      )
      expect(rows.map((r) => [r.priority, r.state, r.attempts])).toEqual([
        [0, 'active', 1],
        [1, 'active', 1],
        [1, 'active', 1],
        [2, 'active', 1],
      ])
      expect(rows.map((r) => r.id)).toEqual([added[3]!.id, added[1]!.id, added[4]!.id, added[2]!.id])
      const { rows: stored } = await db.pool.query(
        `select state, attempts, started_at is not null as started from "${db.schema}".jobs where queue = 'split' order by id`,
      )
      expect(stored.map((r) => r.state)).toEqual(['waiting', 'active', 'active', 'active', 'active'])
      expect(stored.filter((r) => r.started).length).toBe(4)
    } finally {
      await queue.close()
    }
  })

  it('seeks past its cursor: a job sorting before it waits for a claim from the head', async () => {
    const queue = new Queue('cursor', { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      const [a, b] = await queue.addBulk([
        { name: 'a', data: {} },
        { name: 'b', data: {} },
      ])
      const {
        rows: [first],
      } = await db.pool.query<{ id: string; priority: number; run_at_us: string }>(
        sqlFor('claim-jobs', db.schema),
        claimArgs('cursor', 1),
      )
      expect(first!.id).toBe(a!.id)
      const urgent = await queue.add('urgent', {}, { priority: 0 })
      await db.pool.query(`update "${db.schema}".jobs set priority = 5 where id = $1`, [b!.id])
      const cursor = [first!.priority, first!.run_at_us, first!.id]
      const { rows: fromCursor } = await db.pool.query<{ id: string }>(
        sqlFor('claim-jobs', db.schema),
        claimArgs('cursor', 10, cursor),
      )
      // b (now priority 5) sorts after the cursor; urgent (priority 0, added later) too: same priority, later run_at.
      expect(fromCursor.map((r) => r.id)).toEqual([urgent.id, b!.id])
      await db.pool.query(
        `update "${db.schema}".jobs set state = 'waiting', priority = 0, run_at = '2000-01-01' where id = $1`,
        [a!.id],
      )
      const { rows: skipped } = await db.pool.query(sqlFor('claim-jobs', db.schema), claimArgs('cursor', 10, cursor))
      expect(skipped).toEqual([])
      const { rows: fromHead } = await db.pool.query<{ id: string }>(
        sqlFor('claim-jobs', db.schema),
        claimArgs('cursor', 10),
      )
      expect(fromHead.map((r) => r.id)).toEqual([a!.id])
    } finally {
      await queue.close()
    }
  })

  it('seeks exactly past its cursor when many jobs share one run_at (a bulk load): the rows earlier claims took are not read again', async () => {
    // One INSERT … SELECT: every row has the same run_at. A cursor that is not exact on run_at (a rounded ms figure
    // stepped back to be safe) puts all of them after it, and every claim reads the index entries of the 20,000 rows
    // claimed before (dead, or marked killed once a scan has seen them dead: ~100 index pages either way).
    await db.pool.query(
      `insert into "${db.schema}".jobs (queue, name, data) select 'shared', 'n', '{}' from generate_series(1, 30000)`,
    )
    const { rows: taken } = await db.pool.query<{ id: string; priority: number; run_at_us: string }>(
      sqlFor('claim-jobs', db.schema),
      claimArgs('shared', 20_000),
    )
    expect(taken).toHaveLength(20_000)
    const last = taken[19_999]!
    const { rows: next } = await db.pool.query<{ id: string }>(
      `select id::text from "${db.schema}".jobs where queue = 'shared' and state = 'waiting' order by id limit 10`,
    )
    const client = await db.pool.connect()
    try {
      await client.query('begin')
      const {
        rows: [plan],
      } = await client.query<{ 'QUERY PLAN': unknown }>(
        `explain (analyze, buffers, format json) ${sqlFor('claim-jobs', db.schema)}`,
        claimArgs('shared', 10, [last.priority, last.run_at_us, last.id]),
      )
      const scan = findNode(plan!['QUERY PLAN'], (n) => n['Index Name'] === 'jobs_due')
      expect(scan?.['Actual Rows']).toBe(10)
      // The seek lands on the 20,001st row: a descent of the index and the ten rows' pages (measured: 4 pages, against 124 for a cursor 1 µs early).
      expect(Number(scan?.['Shared Hit Blocks']) + Number(scan?.['Shared Read Blocks'])).toBeLessThan(30)
      // And it took the next ten in fetch order: none skipped, none taken twice.
      const { rows: claimed } = await client.query<{ id: string }>(
        `select id::text from "${db.schema}".jobs where queue = 'shared' and state <> 'waiting' and id > $1 order by id`,
        [last.id],
      )
      expect(claimed).toEqual(next)
    } finally {
      await client.query('rollback')
      client.release()
    }
  })

  it('is synchronous_commit off inside the claim transaction that claims, and on again after it', async () => {
    const queue = new Queue('cc', { connectionString: db.url, schema: db.schema, migrate: false })
    const client = await db.pool.connect()
    const setting = async () =>
      (await client.query<{ synchronous_commit: string }>('show synchronous_commit')).rows[0]!.synchronous_commit
    try {
      await queue.add('a', {})
      expect(await setting()).toBe('on')
      await client.query('begin')
      try {
        const { rows } = await client.query(sqlFor('claim-jobs', db.schema), claimArgs('cc', 10))
        expect(rows).toHaveLength(1)
        expect(await setting()).toBe('off')
      } finally {
        await client.query('commit')
      }
      expect(await setting()).toBe('on')
      // As a single statement (how the worker sends it): the pooled connection keeps its own setting.
      await client.query(sqlFor('claim-jobs', db.schema), claimArgs('cc', 10))
      expect(await setting()).toBe('on')
    } finally {
      client.release()
      await queue.close()
    }
  })

  it('lock tokens: distinct within one claim, new on every re-claim, and a stale one completes nothing', async () => {
    const queue = new Queue('tokens', { connectionString: db.url, schema: db.schema, migrate: false })
    const claim = async (n: number) =>
      (await db.pool.query<{ id: string; lock_token: string }>(sqlFor('claim-jobs', db.schema), claimArgs('tokens', n)))
        .rows
    try {
      await queue.addBulk(Array.from({ length: 50 }, (_, i) => ({ name: 'job', data: { i } })))
      const first = await claim(50)
      expect(first).toHaveLength(50)
      expect(new Set(first.map((r) => r.lock_token)).size).toBe(50)
      const stored = await db.pool.query(
        `select id::text, lock_token from "${db.schema}".jobs j where queue = 'tokens' order by j.id`,
      )
      expect(stored.rows).toEqual(
        [...first].sort((a, b) => Number(a.id) - Number(b.id)).map((r) => ({ id: r.id, lock_token: r.lock_token })),
      )

      // Back to waiting (as rescue does), then claimed again: every job gets a token it never had.
      const seen = new Set(first.map((r) => r.lock_token))
      for (let round = 0; round < 5; round++) {
        await db.pool.query(
          `update "${db.schema}".jobs set state = 'waiting', lock_token = null, locked_until = null, locked_by = null where queue = 'tokens'`,
        )
        const again = await claim(50)
        expect(again).toHaveLength(50)
        for (const r of again) {
          expect(seen.has(r.lock_token)).toBe(false)
          seen.add(r.lock_token)
        }
      }
      expect(seen.size).toBe(300)

      // The first claim's token of a job no longer completes it.
      const stale = first[0]!
      const { rows } = await db.pool.query(sqlFor('complete-jobs', db.schema), [[stale.id], [stale.lock_token], [null]])
      expect(rows).toEqual([])
      const {
        rows: [job],
      } = await db.pool.query(`select state from "${db.schema}".jobs where id = $1`, [stale.id])
      expect(job.state).toBe('active')
    } finally {
      await queue.close()
    }
  })

  it('a claim whose answer was lost is given back by the part of the tokens the worker chose: that claim only, run not counted', async () => {
    const queue = new Queue('lost', { connectionString: db.url, schema: db.schema, migrate: false })
    const release = (worker: string, prefix: string) =>
      db.pool.query<{ count: number }>(sqlFor('release-lost-claim', db.schema), ['lost', worker, prefix])
    try {
      await queue.addBulk([0, 1, 2].map((i) => ({ name: 'j', data: { i } })))
      const lost = newTokenPrefix()
      const { rows: taken } = await db.pool.query<{ id: string; lock_token: string }>(
        sqlFor('claim-jobs', db.schema),
        claimArgs('lost', 2, HEAD, lost),
      )
      expect(taken.every((r) => r.lock_token.startsWith(lost))).toBe(true)
      const {
        rows: [kept],
      } = await db.pool.query<{ id: string }>(sqlFor('claim-jobs', db.schema), claimArgs('lost', 1))
      // Another worker's name, or a prefix no claim used, gives back nothing.
      expect((await release('other', lost)).rows[0]!.count).toBe(0)
      expect((await release('w', newTokenPrefix())).rows[0]!.count).toBe(0)
      expect((await release('w', lost)).rows[0]!.count).toBe(2)
      const { rows } = await db.pool.query(
        `select id::text, state, attempts, lock_token, locked_by, started_at from "${db.schema}".jobs where queue = 'lost' order by id`,
      )
      expect(rows).toEqual([
        ...taken.map((r) => ({
          id: r.id,
          state: 'waiting',
          attempts: 0,
          lock_token: null,
          locked_by: null,
          started_at: null,
        })),
        expect.objectContaining({ id: kept!.id, state: 'active', attempts: 1, locked_by: 'w' }),
      ])
    } finally {
      await queue.close()
    }
  })
})

type PlanNode = Record<string, unknown> & { Plans?: PlanNode[] }

/** The first node of an EXPLAIN (FORMAT JSON) plan, depth first, that matches. */
function findNode(explained: unknown, match: (n: PlanNode) => boolean): PlanNode | undefined {
  const walk = (n: PlanNode): PlanNode | undefined =>
    match(n) ? n : (n.Plans ?? []).map(walk).find((x) => x !== undefined)
  return walk((explained as { Plan: PlanNode }[])[0]!.Plan)
}
