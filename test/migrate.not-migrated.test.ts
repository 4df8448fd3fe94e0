// With `migrate: false` on a schema that was never migrated, every call fails with a SetupError that names the fix
// (`pgonce migrate`, `migrate({…})`, or migrating on first use) and keeps PostgreSQL's error as its cause; after a
// migration the same objects work.

import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, Queue, SetupError, Worker, migrate } from '../src/index.js'
import { databaseUrl } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'

const url = databaseUrl()
const schema = `t_unmigrated_${randomBytes(4).toString('hex')}`
const admin = new pg.Pool({ connectionString: url, max: 2 })
const closers: (() => Promise<void>)[] = []

beforeAll(async () => {
  await admin.query(`drop schema if exists "${schema}" cascade`)
})
afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {})
  await admin.query(`drop schema if exists "${schema}" cascade`)
  await admin.end()
})

function expectNotMigrated(err: unknown): void {
  expect(err).toBeInstanceOf(SetupError)
  const e = err as SetupError
  expect(e.code).toBe('NOT_MIGRATED')
  expect(e.message).toContain(`npx pgonce migrate --schema ${schema}`)
  expect(e.message).toContain('migrate({')
  expect(e.sqlstate).toMatch(/^(3F000|42P01|42883)$/)
  expect((e.cause as { code?: string }).code).toBe(e.sqlstate)
}

const failure = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => {
      throw new Error('expected the call to fail')
    },
    (err: unknown) => err,
  )

describe('migrate: false on a schema that does not exist', () => {
  it('Queue calls (on its pool and in your transaction), Effects and a Worker say to migrate; after migrate() they work', async () => {
    const queue = new Queue('q', { connectionString: url, schema, migrate: false })
    const effects = new Effects({ connectionString: url, schema, migrate: false })
    closers.push(
      () => queue.close(),
      () => effects.close(),
    )
    expectNotMigrated(await failure(queue.add('plain', {})))
    expectNotMigrated(await failure(queue.add('keyed', {}, { jobId: 'k' })))
    expectNotMigrated(await failure(queue.getJobCounts()))
    expectNotMigrated(await failure(effects.runOnce('e', () => {})))
    const client = await admin.connect()
    try {
      expectNotMigrated(await failure(queue.add('in-tx', {}, { tx: client })))
    } finally {
      client.release()
    }

    const errors: Error[] = []
    const worker = new Worker('q', async () => {}, {
      connectionString: url,
      schema,
      migrate: false,
      pollIntervalMs: 100,
      maintenanceIntervalMs: 0,
    })
    worker.on('error', (err) => errors.push(err))
    closers.push(() => worker.close())
    await waitFor(() => errors.some((e) => e instanceof SetupError), 10_000, "the worker's 'error'")
    expectNotMigrated(errors.find((e) => e instanceof SetupError))

    await migrate({ connectionString: url, schema })
    const job = await queue.add('plain', {})
    expect(job.outcome).toBe('added')
    expect(await effects.runOnce('e', () => {})).toBe('ran')
  })
})
