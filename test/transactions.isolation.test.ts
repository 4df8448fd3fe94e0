// Inside a REPEATABLE READ caller transaction, a job committed after the snapshot surfaces as a serialization failure (40001), never a hang or a wrong answer.

import { afterAll, beforeAll, expect, it } from 'vitest'
import { Queue } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema
let queue: Queue<Record<string, never>>

beforeAll(async () => {
  db = await freshSchema('isolation')
  queue = new Queue('iso', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

it.each([
  ['a jobId', (n: number) => ({ jobId: `rr-job-${n}` })],
  ['a dedup key', (n: number) => ({ deduplication: { id: `rr-key-${n}`, ttl: 60_000 } })],
])("%s committed after the caller's snapshot: SQLSTATE 40001 within a second", async (_, opts) => {
  const n = Math.floor(Math.random() * 1e9)
  const client = await db.pool.connect()
  try {
    await client.query('begin isolation level repeatable read')
    await client.query('select 1') // the snapshot is taken here
    const winner = await queue.add('x', {}, opts(n))
    expect(winner.outcome).toBe('added')
    const started = Date.now()
    await expect(queue.add('x', {}, { ...opts(n), tx: client })).rejects.toMatchObject({ code: '40001' })
    expect(Date.now() - started).toBeLessThan(1_000)
  } finally {
    // a session lost mid-test is released as broken, so that dropping the schema never waits on it
    const lost = await client.query('rollback').then(
      () => undefined,
      (error: unknown) => error as Error,
    )
    client.release(lost)
  }
})
