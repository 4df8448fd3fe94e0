// `listen: 'shared'`, the default: the Workers of one process share one LISTEN connection however many there are and
// whichever queues they run: 50 Workers over 10 queues hold one LISTEN session, each queue's jobs still start on NOTIFY
// (long before the poll), a terminated shared session is replaced for all of them, and it ends with the last Worker. A
// Worker with `listen: 'own'` keeps a connection of its own, named for it.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'
import { waitForIdleSlot } from './helpers/idle-slots.js'
import { sessionsNamed, sharedListenerName } from './helpers/listeners.js'

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
function sharedSessions(worker: Worker): Promise<number[]> {
  return sessionsNamed(db, sharedListenerName(worker.id))
}

describe("listen: 'shared' (the default)", () => {
  it('refuses any other string, naming options.listen, before any I/O', () => {
    expect(() => new Worker('x', async () => {}, { connectionString: db.url, listen: 'yes' as never })).toThrow(
      /options\.listen/,
    )
  })

  it('Workers from connection strings with different concurrency (pools of different sizes) share it', async () => {
    const options = { connectionString: db.url, schema: db.schema, maintenanceIntervalMs: 0, migrate: false }
    const small = new Worker('sizes', async () => {}, { ...options, concurrency: 1 })
    const large = new Worker('sizes-large', async () => {}, { ...options, concurrency: 12 })
    try {
      await Promise.all([small.run(), large.run()])
      const [pid] = await waitFor(
        async () => {
          const pids = await sharedSessions(small)
          return pids.length === 1 && small.listenerPid === pids[0] ? pids : undefined
        },
        10_000,
        'one shared session',
      )
      expect(large.listenerPid).toBe(pid)
    } finally {
      await Promise.all([small.close(), large.close()])
    }
  })

  it('50 Workers over 10 queues: one LISTEN session, wake-ups on NOTIFY for every queue, replaced once for all', async () => {
    const started = new Map<string, number>()
    const options = {
      pool,
      schema: db.schema,
      concurrency: 1,
      pollIntervalMs: 60_000,
      maintenanceIntervalMs: 0,
      migrate: false,
    }
    const workers: Worker[] = []
    for (let q = 0; q < QUEUES; q++)
      for (let w = 0; w < PER_QUEUE; w++)
        workers.push(
          new Worker(`shared${q}`, async (job) => void started.set(job.id, Date.now()), {
            ...options,
            // The default, and both ways of saying it.
            ...(w === 1 ? { listen: 'shared' as const } : w === 2 ? { listen: true } : {}),
          }),
        )
    const errors: Error[] = []
    for (const w of workers) w.on('error', (err) => errors.push(err))
    const queues = Array.from(
      { length: QUEUES },
      (_, q) => new Queue(`shared${q}`, { pool, schema: db.schema, migrate: false }),
    )
    const own = new Worker('own', async () => {}, { ...options, listen: 'own' })
    try {
      await Promise.all([...workers, own].map((w) => w.run()))
      const [pid] = await waitFor(
        async () => ((await sharedSessions(workers[0]!)).length === 1 ? sharedSessions(workers[0]!) : undefined),
        10_000,
        'one shared session',
      )
      expect(new Set(workers.map((w) => w.listenerPid))).toEqual(new Set([pid]))
      expect(own.listenerPid).not.toBe(pid)
      expect(own.listenerPid).not.toBeNull()
      expect(await sessionsNamed(db, `pgonce-listener ${own.id}`)).toEqual([own.listenerPid])

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
          const pids = await sharedSessions(workers[0]!)
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
      expect(await sharedSessions(workers[0]!)).toEqual([newPid])
      await workers[0]!.close()
      await waitFor(async () => (await sharedSessions(workers[0]!)).length === 0, 10_000, 'the shared session to end')
      expect(errors.filter((e) => !/LISTEN connection was lost/.test(e.message))).toEqual([])
    } finally {
      await Promise.all([...workers, own].map((w) => w.close()))
      for (const queue of queues) await queue.close()
    }
  })
})
