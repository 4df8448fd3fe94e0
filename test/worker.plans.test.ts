// Query plans of the worker's hot statements, generic (a prepared statement may switch to its generic plan after five
// executions: fail-job does; the claim, completion and heartbeat were seen to stay on custom plans, replanned at each
// execution): index probes, never a scan of every job or lease.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sqlFor } from '../src/db/sql-files.js'
import { type TestSchema, freshSchema } from './support/schema.js'

let db: TestSchema
let client: pg.Client

beforeAll(async () => {
  db = await freshSchema('worker_plans')
  // Statistics taken while nothing was active (as after a quiet night), then a burst of claims: the estimate of
  // active rows is ~0 while thousands are, the situation in which a partial-index plan goes quadratic.
  await db.pool.query(`insert into "${db.schema}".jobs (queue, name, data) select 'q', 'n', '{}' from generate_series(1, 20000) g`)
  await db.pool.query(`analyze "${db.schema}".jobs`)
  await db.pool.query(
    `update "${db.schema}".jobs set state = 'active', lock_token = gen_random_uuid(), locked_until = now() where id % 10 = 0`)
  client = new pg.Client({ connectionString: db.url })
  await client.connect()
  await client.query('set plan_cache_mode = force_generic_plan')
})
afterAll(async () => {
  await client.end()
  await db.drop()
})

/** The generic plan of sql/<name>.sql, as text. */
async function genericPlan(name: string, types: string, args: string): Promise<string> {
  const statement = `p_${name.replace(/-/g, '_')}`
  await client.query(`prepare ${statement}(${types}) as ${sqlFor(name, db.schema).replace(/^--.*$/gm, '')}`)
  try {
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`explain execute ${statement}(${args})`)
    return rows.map((r) => r['QUERY PLAN']).join('\n')
  } finally {
    await client.query(`deallocate ${statement}`)
  }
}

const ARRAYS = `'{1,2,3}', '{00000000-0000-0000-0000-000000000001,00000000-0000-0000-0000-000000000002,00000000-0000-0000-0000-000000000003}'`

describe('generic plans', () => {
  it('claim: walks jobs_due in order and updates the locked rows by ctid', async () => {
    const plan = await genericPlan('claim-due-jobs', 'text, integer, bigint, text, bigint, bigint', `'q', 100, 30000, 'w', 42, 5000`)
    expect(plan).toContain('jobs_due')
    expect(plan).toMatch(/Tid Scan on jobs j\b/)
    expect(plan).not.toMatch(/Seq Scan on jobs/)
  })

  it('fail: finds its one job by primary key', async () => {
    const plan = await genericPlan('fail-job', 'bigint, uuid, text, text, bigint, text', `1, '00000000-0000-0000-0000-000000000001', 'e', null, 0, 'active'`)
    expect(plan).toMatch(/Index Scan using jobs_pkey on jobs j\b/)
    expect(plan).not.toContain('jobs_leases')
  })

  it.each([
    ['complete-jobs', 'bigint[], uuid[], text[], text', `${ARRAYS}, '{null,null,null}', 'active'`],
    ['heartbeat', 'bigint[], uuid[], bigint, text', `${ARRAYS}, 30000, 'active'`],
    ['release-jobs', 'bigint[], uuid[], bigint, text', `${ARRAYS}, 0, 'active'`],
  ])('%s: one primary-key probe per input row, not a pass over the active leases', async (name, types, args) => {
    const plan = await genericPlan(name, types, args)
    expect(plan).toMatch(/Index Scan using jobs_pkey on jobs j\b/)
    expect(plan).not.toContain('jobs_leases')
    expect(plan).not.toMatch(/Seq Scan on jobs j\b/)
  })
})
