// Query plans of the worker's hot statements, custom and generic: index probes, never a scan of every job or lease.
// Statistics are taken while nothing is leased (as after a quiet night), then a burst of claims: the estimate of leased
// rows is ~0 while thousands are, the situation in which a plan through the jobs_leases partial index goes quadratic.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sqlFor } from '../../src/db/sql-files.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

let db: TestSchema
let client: pg.Client

beforeAll(async () => {
  db = await freshSchema('worker_plans')
  await db.pool.query(
    `insert into "${db.schema}".jobs (queue, name, data) select 'q', 'n', '{}' from generate_series(1, 20000) g`,
  )
  await db.pool.query(`analyze "${db.schema}".jobs`)
  await db.pool.query(
    `update "${db.schema}".jobs set state = 'active', lock_token = gen_random_uuid(), locked_until = now(), locked_by = 'w'
     where id % 10 = 0`,
  )
  client = new pg.Client({ connectionString: db.url })
  await client.connect()
})
afterAll(async () => {
  await client.end()
  await db.drop()
})

/** The plan of sql/<name>.sql with `mode` ('force_custom_plan' or 'force_generic_plan'), as text. */
async function plan(mode: string, name: string, types: string, args: string): Promise<string> {
  const statement = `p_${name.replace(/-/g, '_')}`
  await client.query(`set plan_cache_mode = ${mode}`)
  await client.query(`prepare ${statement}(${types}) as ${sqlFor(name, db.schema).replace(/^--.*$/gm, '')}`)
  try {
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`explain execute ${statement}(${args})`)
    return rows.map((r) => r['QUERY PLAN']).join('\n')
  } finally {
    await client.query(`deallocate ${statement}`)
  }
}

const ARRAYS = `'{1,2,3}', '{00000000-0000-0000-0000-000000000001,00000000-0000-0000-0000-000000000002,00000000-0000-0000-0000-000000000003}'`
const MODES = ['force_custom_plan', 'force_generic_plan']

describe.each(MODES)('plans (%s)', (mode) => {
  it('claim: walks jobs_due from the cursor in order and updates the locked rows by ctid', async () => {
    const p = await plan(
      mode,
      'claim-jobs',
      'text, integer, bigint, text, text, integer, float8, bigint, integer',
      `'q', 100, 30000, 'w', '00000000-0000-0000-', 0, 1e12, 5, null`,
    )
    expect(p).toContain('jobs_due')
    expect(p).toMatch(/Tid Scan on jobs j\b/)
    expect(p).not.toMatch(/Seq Scan on jobs/)
  })

  it('release of a claim whose answer was lost: through the leases, not a scan of every job', async () => {
    const p = await plan(mode, 'release-lost-claim', 'text, text, text', `'q', 'w', '00000000-0000-0000-'`)
    expect(p).toContain('jobs_leases')
    expect(p).not.toMatch(/Seq Scan on jobs/)
  })

  it.each([
    ['fail-job', 'bigint, uuid, text, text, bigint', `1, '00000000-0000-0000-0000-000000000001', 'e', null, 0`],
    ['heartbeat', 'bigint[], uuid[], bigint', `${ARRAYS}, 30000`],
    ['release-jobs', 'bigint[], uuid[], bigint', `${ARRAYS}, 0`],
    ['outcome-recorded', 'bigint[], uuid[]', ARRAYS],
  ])('%s: one primary-key probe per input row, not a pass over the leases', async (name, types, args) => {
    const p = await plan(mode, name, types, args)
    expect(p).toMatch(/Index Scan using jobs_pkey on jobs j\b/)
    expect(p).not.toContain('jobs_leases')
    expect(p).not.toMatch(/Seq Scan on jobs j\b/)
  })
})
