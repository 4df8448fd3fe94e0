// Workers and the hand-off: an idle worker gets the next job from the add itself (_insert_job()), without a claim; a dead or closing one never keeps a job.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker, runMaintenance } from '../src/index.js'
import { type TestSchema, freshSchema } from './support/schema.js'
import { exited, spawnFixture, storedJob, waitFor, waitForState } from './fixtures/worker-helpers.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_handoff')
  await db.pool.query(`create table "${db.schema}".handled (job_id bigint not null, pid int not null, attempt int not null)`)
})
afterAll(async () => {
  await db.drop()
})

const options = () => ({ connectionString: db.url, schema: db.schema, pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false })

/** Resolves once `worker` has signed up as idle on `queue`. */
function signedUp(queue: string, workerId: string): Promise<true> {
  return waitFor(async () => {
    const { rows } = await db.pool.query(
      `select 1 from "${db.schema}".idle_workers where queue = $1 and worker_id = $2`, [queue, workerId])
    return rows.length > 0
  }, 10_000, `${workerId} to sign up as idle`)
}

function gate(): { wait: Promise<void>; open: () => void } {
  let open = () => {}
  const wait = new Promise<void>((resolve) => {
    open = resolve
  })
  return { wait, open }
}

describe('hand-off to an idle Worker', () => {
  it('an add to an idle queue comes back active for the worker, whose handler runs it once with its data (small and too large for NOTIFY)', async () => {
    const queue = new Queue('idle', { connectionString: db.url, schema: db.schema, migrate: false })
    const seen: { id: string; data: unknown; attempts: number }[] = []
    const worker = new Worker('idle', async (job) => {
      seen.push({ id: job.id, data: job.data, attempts: job.attempts })
      return { ok: true }
    }, options())
    try {
      await worker.run()
      await signedUp('idle', worker.id)
      const small = await queue.add('small', { n: 1 })
      expect(small.state).toBe('active')
      expect((await storedJob(db, small.id)).locked_by).toBe(worker.id)
      await waitForState(db, small.id, 'completed', 5_000)

      await signedUp('idle', worker.id)
      const bigData = { text: 'x'.repeat(10_000) }
      const big = await queue.add('big', bigData)
      expect(big.state).toBe('active')
      await waitForState(db, big.id, 'completed', 5_000)
      expect(seen).toEqual([
        { id: small.id, data: { n: 1 }, attempts: 1 },
        { id: big.id, data: bigData, attempts: 1 },
      ])
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('a handed-over job that fails is retried like a claimed one: attempt counted, error kept, the next attempt completes', async () => {
    const queue = new Queue('retry', { connectionString: db.url, schema: db.schema, migrate: false })
    const attempts: number[] = []
    const worker = new Worker('retry', async (job) => {
      attempts.push(job.attempts)
      if (job.attempts === 1) throw new Error('first attempt fails')
      return 'second'
    }, options())
    try {
      await worker.run()
      await signedUp('retry', worker.id)
      const job = await queue.add('flaky', {}, { attempts: 2 })
      expect(job.state).toBe('active')
      const done = await waitForState(db, job.id, 'completed', 5_000)
      expect(done).toMatchObject({ attempts: 2, result: 'second', last_error: 'first attempt fails' })
      expect(attempts).toEqual([1, 2])
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('two idle workers: two adds go one to each (the longest idle first)', async () => {
    const queue = new Queue('pair', { connectionString: db.url, schema: db.schema, migrate: false })
    const release = gate()
    const ran = new Map<string, string>()
    const make = () => {
      const w: Worker = new Worker('pair', async (job) => {
        ran.set(job.id, w.id)
        await release.wait
      }, { ...options(), concurrency: 1, batchSize: 1 })
      return w
    }
    // Workers start as they are constructed: the second only once the first has signed up.
    const first = make()
    let second: Worker | undefined
    try {
      await signedUp('pair', first.id)
      second = make()
      await signedUp('pair', second.id)
      const a = await queue.add('a', {})
      const b = await queue.add('b', {})
      expect([a.state, b.state]).toEqual(['active', 'active'])
      await waitFor(() => ran.size === 2, 5_000, 'both jobs to start')
      expect(ran.get(a.id)).toBe(first.id)
      expect(ran.get(b.id)).toBe(second.id)
    } finally {
      release.open()
      await first.close()
      await second?.close()
      await queue.close()
    }
  })

  it('close() returns a job handed to it while it was closing to the queue, attempt not counted', async () => {
    const queue = new Queue('closing', { connectionString: db.url, schema: db.schema, migrate: false })
    const release = gate()
    const worker = new Worker('closing', async () => {
      await release.wait
    }, { ...options(), concurrency: 2 })
    const client = await db.pool.connect()
    try {
      await worker.run()
      await signedUp('closing', worker.id)
      const running = await queue.add('running', {})
      expect(running.state).toBe('active')
      // The free slot signs up again while the first job runs.
      await signedUp('closing', worker.id)
      await client.query('begin')
      const late = await queue.add('late', {}, { tx: client })
      expect(late.state).toBe('active')
      const closed = worker.close()
      await waitFor(async () => {
        const { rows } = await db.pool.query(`select 1 from pg_stat_activity where state = 'idle in transaction' and pid = $1`, [
          (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid])
        return rows.length === 1
      }, 5_000, 'the caller transaction to be open')
      await client.query('commit')
      release.open()
      await closed
      expect(await waitForState(db, running.id, 'completed', 5_000)).toMatchObject({ attempts: 1 })
      expect(await storedJob(db, late.id)).toMatchObject({ state: 'waiting', attempts: 0, locked_by: null, lock_token: null })
    } finally {
      release.open()
      client.release()
      await worker.close()
      await queue.close()
    }
  })

  it('a job handed over inside a transaction that stayed open past the lease gets its lease extended on arrival, so housekeeping cannot rescue it while it runs', async () => {
    const queue = new Queue('long-tx', { connectionString: db.url, schema: db.schema, migrate: false })
    const release = gate()
    let runs = 0
    const worker = new Worker('long-tx', async () => {
      runs++
      await release.wait
    }, { ...options(), leaseMs: 3_000, heartbeatMs: 2_999 })
    const client = await db.pool.connect()
    try {
      await worker.run()
      await signedUp('long-tx', worker.id)
      await client.query('begin')
      const job = await queue.add('slow-commit', {}, { tx: client })
      expect(job.state).toBe('active')
      // Past the lease, and committed before the worker's next regular heartbeat (3 s after it started).
      await new Promise((r) => setTimeout(r, 3_300))
      await client.query('commit')
      await waitFor(() => runs === 1, 5_000, 'the handler to start')
      const extended = await waitFor(async () => {
        const { rows } = await db.pool.query<{ ahead: boolean }>(
          `select locked_until > now() as ahead from "${db.schema}".jobs where id = $1`, [job.id])
        return rows[0]!.ahead
      }, 1_000, 'the lease to be extended')
      expect(extended).toBe(true)
      expect(await runMaintenance({ pool: db.pool, schema: db.schema })).toMatchObject({ rescued: 0, ran: true })
      expect(await storedJob(db, job.id)).toMatchObject({ state: 'active', attempts: 1, locked_by: worker.id })
      release.open()
      await waitForState(db, job.id, 'completed', 5_000)
      expect(runs).toBe(1)
    } finally {
      release.open()
      client.release()
      await worker.close()
      await queue.close()
    }
  })

  it('a job handed over whose NOTIFY was lost with the LISTEN connection is adopted once the listener is back', async () => {
    const queue = new Queue('adopt', { connectionString: db.url, schema: db.schema, migrate: false })
    const ran: string[] = []
    const worker = new Worker('adopt', async (job) => {
      ran.push(job.id)
    }, options())
    try {
      await worker.run()
      await signedUp('adopt', worker.id)
      // What add_job() leaves behind when the NOTIFY of its hand-off reaches a dying listener.
      const { rows } = await db.pool.query<{ id: string }>(
        `insert into "${db.schema}".jobs (queue, name, data, state, attempts, lock_token, locked_until, locked_by, started_at)
         values ('adopt', 'orphan', '{"n": 7}', 'active', 1, gen_random_uuid(), now() + interval '30 seconds', $1, now())
         returning id`, [worker.id])
      const id = rows[0]!.id
      const oldPid = worker.listenerPid
      expect(oldPid).not.toBeNull()
      await db.pool.query('select pg_terminate_backend($1)', [oldPid])
      expect(await waitForState(db, id, 'completed', 10_000)).toMatchObject({ attempts: 1 })
      expect(ran).toEqual([id])
      expect(worker.listenerPid).not.toBe(oldPid)
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('a worker killed with SIGKILL while idle gets nothing: its sign-up is dropped and the job waits for a live worker', async () => {
    const queue = new Queue('killed', { connectionString: db.url, schema: db.schema, migrate: false })
    const child = spawnFixture('worker-child.ts', {
      PGONCE_URL: db.url, PGONCE_SCHEMA: db.schema, QUEUE: 'killed', POLL_MS: '60000', MAINTENANCE_MS: '0',
    })
    let survivor: Worker | undefined
    try {
      await waitFor(async () => {
        const { rows } = await db.pool.query(`select 1 from "${db.schema}".idle_workers where queue = 'killed'`)
        return rows.length > 0
      }, 60_000, 'the child worker to sign up as idle')
      child.kill('SIGKILL')
      expect(await exited(child)).toBe('SIGKILL')
      // Its LISTEN backend ends once the server sees the socket close.
      await waitFor(async () => {
        const { rows } = await db.pool.query(`select 1 from pg_stat_activity where application_name like 'pgonce-listener %:${child.pid}:%'`)
        return rows.length === 0
      }, 10_000, "the killed worker's LISTEN backend to end")

      const job = await queue.add('after-kill', {})
      expect(job.state).toBe('waiting')
      const { rows: left } = await db.pool.query(`select 1 from "${db.schema}".idle_workers where queue = 'killed'`)
      expect(left).toHaveLength(0)

      survivor = new Worker('killed', async () => {}, options())
      expect(await waitForState(db, job.id, 'completed', 10_000)).toMatchObject({ attempts: 1 })
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await survivor?.close()
      await queue.close()
    }
  })
})
