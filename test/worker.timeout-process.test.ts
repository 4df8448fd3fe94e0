// A handler that ignores its signal and blocks its worker's event loop past the job's timeoutMs (a child process): the
// worker's timer cannot run, but the deadline is the database's, so the job cannot complete. Its lease ends at the
// deadline (not after leaseMs); another worker rescues it as a timed-out attempt, or, without one, the blocked worker's
// own late completion is refused and it records the timeout itself.

import { randomBytes } from 'node:crypto'
import { rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { type Child, exited, notSurviving, spawnFixture } from './helpers/processes.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema
let queue: Queue
const files: string[] = []

beforeAll(async () => {
  db = await freshSchema('worker_timeout_process')
  queue = new Queue('blocked', { connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  for (const f of files) rmSync(f, { force: true })
  await queue.close()
  await db.drop()
})

/** A child worker on queue 'blocked', and the file that ends its handler's block. */
function blockedWorker(): { child: Child; unblock: () => void } {
  const file = join(tmpdir(), `pgonce-unblock-${randomBytes(6).toString('hex')}`)
  files.push(file)
  const child = spawnFixture('timeout-child.ts', {
    PGONCE_URL: db.url,
    PGONCE_SCHEMA: db.schema,
    QUEUE: 'blocked',
    UNBLOCK: file,
  })
  return { child, unblock: () => writeFileSync(file, '') }
}

function said(child: Child, key: string, value?: unknown): Promise<Record<string, unknown>> {
  return waitFor(
    () => child.messages().find((m) => key in m && (value === undefined || m[key] === value)),
    30_000,
    `the child to say ${key} ${JSON.stringify(value)}\n${child.output()}`,
  )
}

/** The job's stored deadline and lease, in ms after started_at, and whether the database clock has passed the deadline. */
async function deadline(id: string) {
  const { rows } = await db.pool.query<{ timeout_ms: number; lease_ms: number | null; passed: boolean }>(
    `select (extract(epoch from timeout_at - started_at) * 1000)::float8 as timeout_ms,
       (extract(epoch from locked_until - started_at) * 1000)::float8 as lease_ms, now() >= timeout_at as passed
     from "${db.schema}".jobs where id = $1`,
    [id],
  )
  return rows[0]
}

async function stop(child: Child): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM')
    await exited(child)
  }
}

describe('a handler blocking its event loop past timeoutMs', () => {
  it('cannot complete: its lease ends at the deadline, another worker rescues it as timed out, its late return is refused', async () => {
    const job = await queue.add('spin', {}, { timeoutMs: 800, attempts: 1 })
    const { child, unblock } = blockedWorker()
    let rescuer: Worker | undefined
    const ranHere: string[] = []
    try {
      await said(child, 'started', job.id)
      // leaseMs is 30 s, but the lease ends with the run's deadline.
      expect(await deadline(job.id)).toMatchObject({ timeout_ms: 800, lease_ms: 800 })
      rescuer = new Worker('blocked', async (j) => void ranHere.push(j.id), {
        connectionString: db.url,
        schema: db.schema,
        pollIntervalMs: 100,
        maintenanceIntervalMs: 100,
        migrate: false,
      })
      // The rescue: a timed-out attempt, the last one: failed, not run again.
      const failed = await waitForState(db, job.id, 'failed')
      expect(failed).toMatchObject({ attempts: 1, result: null, lock_token: null })
      expect(failed.last_error).toMatch(/timed out after 800 ms \(worker .* did not record it/)
      expect(notSurviving(child)).toBeNull()

      unblock()
      await said(child, 'returned', job.id)
      // Its completion is refused; the worker reports the lost run, nothing more.
      await said(child, 'error', 'LeaseLostError')
      expect(await storedJob(db, job.id)).toEqual(failed)
      expect(child.messages().filter((m) => 'completed' in m)).toEqual([])
      expect(ranHere).toEqual([])
      expect(notSurviving(child)).toBeNull()
    } finally {
      unblock()
      await rescuer?.close()
      await stop(child)
    }
  }, 60_000)

  it('cannot complete with no one to rescue it: the database refuses the late completion, and the worker records the timeout', async () => {
    const job = await queue.add('spin', {}, { timeoutMs: 600, attempts: 1 })
    const { child, unblock } = blockedWorker()
    try {
      await said(child, 'started', job.id)
      const token = (await storedJob(db, job.id)).lock_token
      await waitFor(async () => (await deadline(job.id))?.passed, 10_000, 'the deadline to pass')
      // Still active under the run's token: only the deadline stands between the late return and a completion.
      expect(await storedJob(db, job.id)).toMatchObject({ state: 'active', lock_token: token })

      unblock()
      await said(child, 'returned', job.id)
      const failed = await said(child, 'failed', job.id)
      expect(failed).toMatchObject({ state: 'failed', error: 'JobTimeoutError' })
      const row = await storedJob(db, job.id)
      expect(row).toMatchObject({ state: 'failed', attempts: 1, result: null })
      expect(row.last_error).toMatch(/timed out after 600 ms/)
      expect(child.messages().filter((m) => 'completed' in m || 'crash' in m)).toEqual([])
    } finally {
      unblock()
      await stop(child)
    }
  }, 60_000)
})
