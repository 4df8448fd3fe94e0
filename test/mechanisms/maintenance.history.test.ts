// Housekeeping over a long history: with many completed jobs still inside their retention period, a round reads the
// rows it changes, not the history. (Before: the retention cutoff was a join filter, so every round walked each
// queue's whole history and called _prunable() on every row; the promotion safety net scanned the whole table.)

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runMaintenance } from '../../src/index.js'
import { sqlFor } from '../../src/db/sql-files.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

const HISTORY = 20_000
let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('maint_history')
  // HISTORY completed jobs finished an hour ago (inside the default 24 h), and 5 finished two days ago (past it).
  await db.pool.query(
    `insert into "${db.schema}".jobs (queue, name, data, state, attempts, finished_at)
     select 'hist', 'done', '{}', 'completed', 1, now() - case when g <= 5 then interval '2 days' else interval '1 hour' end
     from generate_series(1, $1) g`,
    [HISTORY + 5],
  )
  await db.pool.query(`analyze "${db.schema}".jobs`)
})
afterAll(async () => {
  await db.drop()
})

/** EXPLAIN ANALYZE of one of pgonce's statements, rolled back; every plan node, flattened. */
async function planNodes(file: Parameters<typeof sqlFor>[0], values: unknown[]): Promise<Record<string, unknown>[]> {
  const client = await db.pool.connect()
  try {
    await client.query('begin')
    const { rows } = await client.query(`explain (analyze, format json) ${sqlFor(file, db.schema)}`, values)
    const nodes: Record<string, unknown>[] = []
    const walk = (n: Record<string, unknown>): void => {
      nodes.push(n)
      for (const child of (n.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child)
    }
    const [explained] = rows[0]['QUERY PLAN'] as { Plan: Record<string, unknown> }[]
    if (explained === undefined) throw new Error('EXPLAIN returned no plan')
    walk(explained.Plan)
    return nodes
  } finally {
    await client.query('rollback')
    client.release()
  }
}

describe('housekeeping with a long history', () => {
  it('retention reads only the jobs past their period: the cutoff bounds the index scan', async () => {
    const nodes = await planNodes('prune-finished-jobs', ['hist', 'completed', 1000])
    const scans = nodes.filter((n) => n['Relation Name'] === 'jobs' && n['Index Name'] === 'jobs_finished')
    expect(scans.length).toBe(1)
    expect(scans[0]?.['Actual Rows']).toBe(5)
    expect(
      nodes.some((n) => typeof n['Rows Removed by Join Filter'] === 'number' && n['Rows Removed by Join Filter'] > 0),
    ).toBe(false)
  })

  it('the promotion safety net does not scan the table: an index on the jobs waiting for their dependencies', async () => {
    const nodes = await planNodes('promote-dependents', [1000])
    expect(nodes.filter((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'jobs')).toEqual([])
  })

  it('a round prunes the jobs past their period and keeps the history inside it', async () => {
    const result = await runMaintenance({ connectionString: db.url, schema: db.schema })
    expect(result).toMatchObject({ ran: true, pruned: 5 })
    const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs`)
    expect(rows[0].n).toBe(HISTORY)
  })
})
