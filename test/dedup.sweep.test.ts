// Housekeeping of expired dedup keys (sql/delete-expired-dedup-keys.sql): bounded batches, held keys untouched, locked rows skipped.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { sqlFor } from '../src/db/sql-files.js'
import type { Queue } from '../src/index.js'
import { closeDedupSuite, openDedupSuite } from './helpers/dedup-fixture.js'
import type { TestSchema } from './helpers/schema.js'

const QUEUE = 'dedup-sweep'
const TTL = 3_600_000

let db: TestSchema
let queue: Queue

beforeAll(async () => ({ db, queue } = await openDedupSuite('dedup_sweep', QUEUE)))
afterAll(() => closeDedupSuite({ db, queue }))

beforeEach(async () => {
  await db.pool.query(`truncate "${db.schema}".dedup_keys, "${db.schema}".jobs cascade`)
})

async function sweep(limit: number): Promise<number> {
  const { rows } = await db.pool.query<{ count: number }>(sqlFor('delete-expired-dedup-keys', db.schema), [limit])
  return rows[0]?.count as number
}

/** `n` keys that expired between 1 s and 1 h ago, each owned by a completed job of its own. */
async function expiredKeys(n: number, prefix: string): Promise<void> {
  await db.pool.query(
    `with owners as (
       insert into "${db.schema}".jobs (queue, name, data, state)
       select $1, 'owner', '{}', 'completed' from generate_series(1, $3) g
       returning id
     )
     insert into "${db.schema}".dedup_keys (queue, key, job_id, expires_at)
     select $1, $2 || o.n, o.id, now() - make_interval(secs => 1 + o.n % 3600)
     from (select id, row_number() over (order by id) as n from owners) o`,
    [QUEUE, prefix, n],
  )
}

const keyCount = async () =>
  Number((await db.pool.query(`select count(*) as n from "${db.schema}".dedup_keys`)).rows[0].n)

describe('delete-expired-dedup-keys', () => {
  it('deletes at most the limit per run, only expired keys, until none are left', async () => {
    await expiredKeys(1000, 'expired:')
    const ttlOwner = await queue.add('push', {}, { deduplication: { id: 'held-ttl', ttl: TTL } })
    const noTtlOwner = await queue.add('push', {}, { deduplication: { id: 'held-no-ttl' } })

    expect(await sweep(300)).toBe(300)
    expect(await keyCount()).toBe(1002 - 300)
    expect(await sweep(300)).toBe(300)
    expect(await sweep(300)).toBe(300)
    expect(await sweep(300)).toBe(100)
    expect(await sweep(300)).toBe(0)

    const { rows } = await db.pool.query(`select key, job_id from "${db.schema}".dedup_keys order by key`)
    expect(rows).toEqual([
      { key: 'held-no-ttl', job_id: noTtlOwner.id },
      { key: 'held-ttl', job_id: ttlOwner.id },
    ])
    expect(await queue.getDeduplicationJobId('held-ttl')).toBe(ttlOwner.id)
  })

  it('skips a key another transaction has locked, and leaves it for a later run', async () => {
    await expiredKeys(10, 'locked:')
    const tx = await db.pool.connect()
    try {
      await tx.query('begin')
      await tx.query(`select 1 from "${db.schema}".dedup_keys where queue = $1 and key = 'locked:1' for update`, [
        QUEUE,
      ])
      expect(await sweep(100)).toBe(9)
      await tx.query('commit')
    } finally {
      tx.release()
    }
    expect(await sweep(100)).toBe(1)
    expect(await keyCount()).toBe(0)
  })

  it('two sweeps at once never delete a key twice and together delete them all', async () => {
    await expiredKeys(600, 'race:')
    const counts = await Promise.all([sweep(400), sweep(400)])
    expect(counts[0] + counts[1] + (await sweep(1000))).toBe(600)
    expect(await keyCount()).toBe(0)
  })

  it('does not delete a key an add re-took after it expired', async () => {
    const old = await queue.add('push', {}, { deduplication: { id: 'retaken', ttl: TTL } })
    await db.pool.query(
      `update "${db.schema}".dedup_keys set expires_at = now() - interval '1 second' where key = 'retaken'`,
    )
    const fresh = await queue.add('push', {}, { deduplication: { id: 'retaken', ttl: TTL } })
    expect(fresh.id).not.toBe(old.id)
    expect(await sweep(100)).toBe(0)
    expect(await queue.getDeduplicationJobId('retaken')).toBe(fresh.id)
  })
})
