// Wake-ups: a job added to an idle queue starts on NOTIFY, long before the poll; a killed LISTEN connection (the
// process's shared one, found by its application_name) is reported on 'error' by every Worker on it and replaced, and
// the next job still starts promptly.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Logger, Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'
import { waitForIdleSlot } from './helpers/idle-slots.js'
import { sessionsNamed, sharedListenerName } from './helpers/listeners.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_listen')
})
afterAll(async () => {
  await db.drop()
})

/** The pid of the worker's LISTEN backend (its process's shared one), as the server sees it. */
async function listenerBackend(worker: { id: string }): Promise<number | undefined> {
  const pids = await sessionsNamed(db, sharedListenerName(worker.id))
  return pids.length === 1 ? pids[0] : undefined
}

describe('Worker wake-ups', () => {
  it('replaces a killed LISTEN connection; jobs added afterwards start well under pollIntervalMs', async () => {
    const queue = new Queue('listen', { connectionString: db.url, schema: db.schema, migrate: false })
    const started = new Map<string, number>()
    const worker = new Worker(
      'listen',
      async (job) => {
        started.set(job.id, Date.now())
      },
      { connectionString: db.url, schema: db.schema, pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false },
    )
    const errors: Error[] = []
    worker.on('error', (err) => errors.push(err))
    try {
      await worker.run()
      // Asleep (it holds an idle slot): only a NOTIFY can wake it within the test's time.
      await waitForIdleSlot(db, 'listen')
      const t0 = Date.now()
      const first = await queue.add('a', {})
      await waitFor(() => started.has(first.id), 5_000, 'the first job to start on NOTIFY')
      expect(started.get(first.id)! - t0).toBeLessThan(2_000)

      const oldPid = await waitFor(() => listenerBackend(worker), 5_000, 'the LISTEN backend')
      expect(worker.listenerPid).toBe(oldPid)
      const { rows } = await db.pool.query<{ ok: boolean }>('select pg_terminate_backend($1) as ok', [oldPid])
      expect(rows[0]!.ok).toBe(true)
      // The backend shows up at connect; the worker takes it as its listener once LISTEN (and its lock) went through.
      const newPid = await waitFor(
        async () => {
          const pid = await listenerBackend(worker)
          return pid !== undefined && pid !== oldPid && worker.listenerPid === pid ? pid : undefined
        },
        10_000,
        'a new LISTEN backend',
      )
      expect(newPid).not.toBe(oldPid)
      expect(worker.listenerPid).toBe(newPid)
      await waitForIdleSlot(db, 'listen')

      const t1 = Date.now()
      const second = await queue.add('b', {})
      await waitFor(() => started.has(second.id), 5_000, 'the next job to start after the reconnect')
      expect(started.get(second.id)! - t1).toBeLessThan(2_000)
      // The dropped connection was handled: no error reached the 'error' event as an exception.
      expect(errors.filter((e) => !/terminat/i.test(e.message))).toEqual([])
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('a job added in the same instant the listener is killed still starts (NOTIFY before the kill, or the poll after the reconnect)', async () => {
    const queue = new Queue('listen-gap', { connectionString: db.url, schema: db.schema, migrate: false })
    const started = new Set<string>()
    const worker = new Worker(
      'listen-gap',
      async (job) => {
        started.add(job.id)
      },
      { connectionString: db.url, schema: db.schema, pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false },
    )
    try {
      await worker.run()
      const oldPid = await waitFor(() => listenerBackend(worker), 5_000, 'the LISTEN backend')
      // Kill the listener and add the job in the same round trip: its NOTIFY reaches no one of ours.
      const { rows } = await db.pool.query<{ id: string }>(
        `select pg_terminate_backend($1), (a.job).id from "${db.schema}".add_job(queue => 'listen-gap', name => 'gap') a`,
        [oldPid],
      )
      const id = rows[0]!.id
      await waitFor(() => started.has(id), 10_000, 'the job added during the gap to start')
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it("a job added inside the caller's transaction wakes the worker on commit, not before", async () => {
    const queue = new Queue('listen-tx', { connectionString: db.url, schema: db.schema, migrate: false })
    const started = new Map<string, number>()
    const worker = new Worker(
      'listen-tx',
      async (job) => {
        started.set(job.id, Date.now())
      },
      { connectionString: db.url, schema: db.schema, pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false },
    )
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    try {
      await worker.run()
      await waitForIdleSlot(db, 'listen-tx')
      await client.query('begin')
      const job = await queue.add('in-tx', {}, { tx: client })
      // Lets time pass on purpose: a wake-up sent before the commit would have started the job by now.
      await new Promise((r) => setTimeout(r, 300))
      expect(started.has(job.id)).toBe(false)
      const committedAt = Date.now()
      await client.query('commit')
      await waitFor(() => started.has(job.id), 5_000, 'the committed job to start')
      expect(started.get(job.id)! - committedAt).toBeLessThan(2_000)
    } finally {
      await client.end()
      await worker.close()
      await queue.close()
    }
  })

  it('a killed shared LISTEN connection is reported once per outage by each Worker on it, at error level without a listener, and replaced for both', async () => {
    const logged: string[] = []
    const logger: Logger = {
      debug: () => {},
      info: () => {},
      warn: () => {},
      child: () => logger,
      error: (o: string | object) => void logged.push((o as { err?: Error }).err?.message ?? ''),
    }
    const quiet = new Worker('listen-lost', async () => {}, {
      connectionString: db.url,
      schema: db.schema,
      maintenanceIntervalMs: 0,
      migrate: false,
      logger,
    })
    const worker = new Worker('listen-lost', async () => {}, {
      connectionString: db.url,
      schema: db.schema,
      maintenanceIntervalMs: 0,
      migrate: false,
    })
    const errors: Error[] = []
    worker.on('error', (err) => errors.push(err))
    try {
      await Promise.all([worker.run(), quiet.run()])
      // Found by its application_name, as an operator would: pgonce-listener <host>:<pid>:shared.
      const oldPid = await waitFor(() => listenerBackend(worker), 5_000, 'the LISTEN backend')
      await waitFor(() => worker.listenerPid === oldPid && quiet.listenerPid === oldPid, 5_000, 'both on it')
      const { rows } = await db.pool.query<{ ok: boolean }>('select pg_terminate_backend($1) as ok', [oldPid])
      expect(rows[0]!.ok).toBe(true)
      await waitFor(
        async () => {
          const pid = await listenerBackend(worker)
          return pid !== undefined && pid !== oldPid && worker.listenerPid === pid && quiet.listenerPid === pid
        },
        10_000,
        'a new LISTEN backend for both Workers',
      )
      expect(errors.map((e) => e.message)).toEqual([
        expect.stringMatching(/LISTEN connection was lost \(terminating connection/),
      ])
      expect(logged).toEqual([expect.stringMatching(/LISTEN connection was lost/)])
    } finally {
      await Promise.all([worker.close(), quiet.close()])
    }
  })
})
