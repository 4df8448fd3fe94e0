// Writes other than adds (key removal, retryJob) take `tx` too: they happen only if the caller commits.

import { afterAll, beforeAll, expect, it } from 'vitest'
import { Queue } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema
let queue: Queue<{ n: number }>

beforeAll(async () => {
  db = await freshSchema('writes_in_tx')
  queue = new Queue('writes', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

async function inTransaction(commit: boolean, fn: (tx: import('pg').PoolClient) => Promise<unknown>): Promise<void> {
  const client = await db.pool.connect()
  try {
    await client.query('begin')
    await fn(client)
    await client.query(commit ? 'commit' : 'rollback')
  } finally {
    client.release()
  }
}

it('removeDeduplicationKey and job.removeDeduplicationKey inside a rolled-back transaction leave the key held', async () => {
  const job = await queue.add('k', { n: 1 }, { deduplication: { id: 'key-a', ttl: 60_000 } })
  await inTransaction(false, async (tx) => {
    expect(await queue.removeDeduplicationKey('key-a', { tx })).toBe(true)
    expect(await job.removeDeduplicationKey({ tx })).toBe(false)
  })
  expect(await queue.getDeduplicationJobId('key-a')).toBe(job.id)
  await inTransaction(false, async (tx) => {
    expect(await job.removeDeduplicationKey({ tx })).toBe(true)
  })
  expect(await queue.getDeduplicationJobId('key-a')).toBe(job.id)
  await inTransaction(true, async (tx) => {
    expect(await job.removeDeduplicationKey({ tx })).toBe(true)
  })
  expect(await queue.getDeduplicationJobId('key-a')).toBeNull()
})

it('retryJob inside a rolled-back transaction leaves the job failed; committed, it runs again', async () => {
  const job = await queue.add('r', { n: 2 })
  await db.pool.query(
    `update "${db.schema}".jobs set state = 'failed', attempts = 1, finished_at = now() where id = $1`,
    [job.id],
  )
  const state = async () =>
    (await db.pool.query(`select state from "${db.schema}".jobs where id = $1`, [job.id])).rows[0].state
  await inTransaction(false, async (tx) => {
    expect((await queue.retryJob(job.id, { tx })).state).toBe('waiting')
  })
  expect(await state()).toBe('failed')
  await inTransaction(true, async (tx) => {
    await queue.retryJob(job.id, { tx })
  })
  expect(await state()).toBe('waiting')
})

it('rejects a bad tx and unknown options before any I/O', async () => {
  await expect(queue.retryJob('1', { tx: null } as never)).rejects.toMatchObject({
    code: 'INVALID_TYPE',
    field: 'options.tx',
  })
  await expect(queue.removeDeduplicationKey('k', { txn: 1 } as never)).rejects.toMatchObject({
    code: 'UNKNOWN_OPTION',
    field: 'options.txn',
  })
})
