// The SQL entry point add_job(... dedup_id, dedup_ttl_ms, dedup_extend, dedup_replace) applies the same key rules as queue.add.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Queue } from '../src/index.js'
import { closeDedupSuite, openDedupSuite } from './helpers/dedup-fixture.js'
import type { TestSchema } from './helpers/schema.js'

const QUEUE = 'dedup-sql'
const TTL = 3_600_000

let db: TestSchema
let queue: Queue

beforeAll(async () => ({ db, queue } = await openDedupSuite('dedup_sql', QUEUE)))
afterAll(() => closeDedupSuite({ db, queue }))

interface Admission {
  outcome: string | null
  error: string | null
  id: string | null
  data: unknown
}

/** Calls add_job the way a trigger or psql would, with named arguments. */
async function addJob(key: string, data: object, extra = ''): Promise<Admission> {
  const { rows } = await db.pool.query<Admission>(
    `select a.outcome, a.error, (a.job).id, (a.job).data
     from "${db.schema}".add_job(queue => $1, name => 'push', data => $2::jsonb, dedup_id => $3, dedup_ttl_ms => $4${extra}) a`,
    [QUEUE, JSON.stringify(data), key, TTL],
  )
  return rows[0] as Admission
}

describe('add_job from SQL', () => {
  it('adds, answers duplicates, extends and replaces by the same rules', async () => {
    const first = await addJob('k1', { v: 1 })
    expect(first).toMatchObject({ outcome: 'added', error: null, data: { v: 1 } })
    expect(await addJob('k1', { v: 2 })).toEqual({
      outcome: 'duplicate-key',
      error: null,
      id: first.id,
      data: { v: 1 },
    })
    expect(await addJob('k1', { v: 3 }, ', dedup_extend => true')).toMatchObject({ outcome: 'extended', id: first.id })
    const replaced = await addJob('k1', { v: 4 }, ', dedup_replace => true')
    expect(replaced).toMatchObject({ outcome: 'replaced', data: { v: 4 } })
    expect(replaced.id).not.toBe(first.id)
    // SQL and TypeScript callers share one key space.
    const viaTs = await queue.add('push', { v: 5 }, { deduplication: { id: 'k1', ttl: TTL } })
    expect(viaTs.id).toBe(replaced.id)
    expect(viaTs.outcome).toBe('duplicate-key')
  })

  it('raises a rejection by default, with the Duplicate unique_key message, and writes nothing', async () => {
    const owner = await addJob('k2', { v: 1 })
    await db.pool.query(`update "${db.schema}".jobs set state = 'active' where id = $1`, [owner.id])
    const err = await addJob('k2', { v: 2 }, ', dedup_extend => true').catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'PO001', detail: 'EXTEND_NOT_PENDING' })
    expect((err as Error).message).toContain('Duplicate unique_key (extended TTL)')
    const { rows } = await db.pool.query(`select id from "${db.schema}".jobs where dedup_key = 'k2'`)
    expect(rows).toEqual([{ id: owner.id }])
  })

  it('returns the rejection as a row with raise_rejection => false', async () => {
    const owner = await addJob('k3', { v: 1 })
    await db.pool.query(`update "${db.schema}".jobs set state = 'completed' where id = $1`, [owner.id])
    expect(await addJob('k3', { v: 2 }, ', dedup_extend => true, raise_rejection => false')).toEqual({
      outcome: null,
      error: 'EXTEND_NOT_PENDING',
      id: owner.id,
      data: { v: 1 },
    })
  })

  it('refuses extend without a ttl', async () => {
    const err = await db.pool
      .query(
        `select * from "${db.schema}".add_job(queue => $1, name => 'push', dedup_id => 'k4', dedup_extend => true)`,
        [QUEUE],
      )
      .catch((e: unknown) => e)
    expect(err).toMatchObject({ code: '22023' })
  })
})
