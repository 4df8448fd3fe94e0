// `listen: 'shared'`: the Workers of one process share one LISTEN connection however many there are and whichever
// queues they run: 50 Workers over 10 queues hold one LISTEN session, each queue's jobs still start on NOTIFY (long
// before the poll), a terminated shared session is replaced for all of them, and it ends with the last Worker. A Worker
// without the option keeps a connection of its own.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'
import { waitForIdleSlot } from './helpers/idle-slots.js'

const QUEUES = 10
const PER_QUEUE = 5

let db: TestSchema
let pool: pg.Pool

beforeAll(async () => {
  db = await freshSchema('worker_shared_listen')
  // One small pool for all 50 Workers: the server's connections are shared by every test file.
  pool = new pg.Pool({ connectionString: db.url, max: 4 })
  pool.on('error', () => {})
})
afterAll(async () => {
  await pool?.end()
  await db?.drop()
})

/** The pids of this process's shared LISTEN sessions, as the server sees them. */
async function sharedSessions(): Promise<number[]> {
  const { rows } = await db.pool.query<{ pid: number }>(
    `select pid from pg_stat_activity where application_name = $1`,
    [`pgonce-listener ${(await import('node:os')).hostname().slice(0, 24)}:${process.pid}:shared`],
  )
  return rows.map((r) => r.pid)
}

describe("listen: 'shared'", () => {
  it('refuses any other string, naming options.listen, before any I/O', () => {
    expect(() => new Worker('x', async () => {}, { connectionString: db.url, listen: 'yes' as never })).toThrow(
      /options\.listen/,
    )
  })

  it('50 Workers over 10 queues: one LISTEN session, wake-ups on NOTIFY for every queue, replaced once for all', async () => {
    const started = new Map<string, number>()
    const options = {
      pool,
      schema: db.schema,
      listen: 'shared' as const,
      concurrency: 1,
      pollIntervalMs: 60_000,
      maintenanceIntervalMs: 0,
      migrate: false,
    }
    const workers: Worker[] = []
    for (let q = 0; q < QUEUES; q++)
      for (let w = 0; w < PER_QUEUE; w++)
        workers.push(new Worker(`shared${q}`, async (job) => void started.set(job.id, Date.now()), options))
    const errors: Error[] = []
    for (const w of workers) w.on('error', (err) => errors.push(err))
    const queues = Array.from(
      { length: QUEUES },
      (_, q) => new Queue(`shared${q}`, { pool, schema: db.schema, migrate: false }),
    )
    const own = new Worker('own', async () => {}, { ...options, listen: true })
    try {
      await Promise.all([...workers, own].map((w) => w.run()))
      const [pid] = await waitFor(
        async () => ((await sharedSessions()).length === 1 ? sharedSessions() : undefined),
        10_000,
        'one shared session',
      )
      expect(new Set(workers.map((w) => w.listenerPid))).toEqual(new Set([pid]))
      expect(own.listenerPid).not.toBe(pid)
      expect(own.listenerPid).not.toBeNull()

      // Each queue asleep behind the shared session's idle slot: only a NOTIFY wakes it within the test's time.
      const wakeAll = async (): Promise<void> => {
        for (let q = 0; q < QUEUES; q++) await waitForIdleSlot(db, `shared${q}`)
        const t0 = Date.now()
        const jobs = await Promise.all(queues.map((queue) => queue.add('a', {})))
        await waitFor(() => jobs.every((j) => started.has(j.id)), 10_000, 'every queue to start its job on NOTIFY')
        for (const j of jobs) expect(started.get(j.id)! - t0).toBeLessThan(5_000)
      }
      await wakeAll()

      await db.pool.query('select pg_terminate_backend($1)', [pid])
      const newPid = await waitFor(
        async () => {
          const pids = await sharedSessions()
          return pids.length === 1 && pids[0] !== pid && workers.every((w) => w.listenerPid === pids[0])
            ? pids[0]
            : undefined
        },
        15_000,
        'the shared session to be replaced for every Worker',
      )
      expect(newPid).not.toBe(pid)
      await wakeAll()

      // It stays while a Worker uses it, and ends with the last one.
      await Promise.all(workers.slice(1).map((w) => w.close()))
      expect(await sharedSessions()).toEqual([newPid])
      await workers[0]!.close()
      await waitFor(async () => (await sharedSessions()).length === 0, 10_000, 'the shared session to end')
      expect(errors.filter((e) => !/LISTEN connection was lost/.test(e.message))).toEqual([])
    } finally {
      await Promise.all([...workers, own].map((w) => w.close()))
      for (const queue of queues) await queue.close()
    }
  })
})
