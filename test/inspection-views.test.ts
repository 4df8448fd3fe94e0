// The inspection views answer "how many per state", "which keys are held and by whom", "what failed and why".

import { afterAll, beforeAll, expect, it } from 'vitest'
import { Queue } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema
let queue: Queue<{ n: number }>

beforeAll(async () => {
  db = await freshSchema('views')
  queue = new Queue('views', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

it('job_counts, held_keys and failed_jobs reflect the jobs table', async () => {
  const held = await queue.add('a', { n: 1 }, { deduplication: { id: 'held', ttl: 60_000 } })
  await queue.add('b', { n: 2 }, { deduplication: { id: 'expired', ttl: 60_000 } })
  await queue.add('c', { n: 3 }, { delay: 60_000 })
  const failed = await queue.add('d', { n: 4 })
  const S = `"${db.schema}"`
  await db.pool.query(`update ${S}.dedup_keys set expires_at = now() - interval '1 second' where key = 'expired'`)
  await db.pool.query(`update ${S}.jobs set state = 'failed', last_error = 'boom', finished_at = now() where id = $1`, [
    failed.id,
  ])

  const counts = await db.pool.query(
    `select state, jobs::int from ${S}.job_counts where queue = 'views' order by state`,
  )
  expect(counts.rows).toEqual([
    { state: 'delayed', jobs: 1 },
    { state: 'failed', jobs: 1 },
    { state: 'waiting', jobs: 2 },
  ])

  const keys = await db.pool.query(`select key, job_id from ${S}.held_keys`)
  expect(keys.rows).toEqual([{ key: 'held', job_id: held.id }])

  const dead = await db.pool.query(`select id, last_error from ${S}.failed_jobs`)
  expect(dead.rows).toEqual([{ id: failed.id, last_error: 'boom' }])
})
