// queue.waitForJob: a wait in this process ends when a worker in a child process ends the job (NOTIFY, the poll when
// LISTEN is down), a job ended before the wait resolves at once, timeouts and missing jobs reject with typed errors,
// and every wait of a Queue shares one LISTEN connection, opened while some call waits.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type Job,
  Queue,
  type QueueOptions,
  ValidationError,
  WaitForJobError,
  WaitForJobTimeoutError,
} from '../src/index.js'
import { terminate } from './helpers/clients.js'
import { freePort } from './helpers/ports.js'
import { type Child, exited, spawnFixture } from './helpers/processes.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'

type Data = { n: number; fail?: boolean }

let db: TestSchema
const opened: Queue<Data>[] = []

beforeAll(async () => {
  db = await freshSchema('wait_for_job')
})
afterAll(async () => {
  await Promise.all(opened.map((q) => q.close()))
  await db.drop()
})

/** A Queue on the test schema whose poll is an hour unless told: only a NOTIFY can end its waits within a test. */
function queueOf(name: string, options: Partial<QueueOptions> = {}): Queue<Data> {
  const queue = new Queue<Data>(name, {
    connectionString: db.url,
    schema: db.schema,
    migrate: false,
    waitPollIntervalMs: 3_600_000,
    ...options,
  })
  opened.push(queue)
  return queue
}

/** The backend pids of the waiter sessions of queue `name`, as the server sees them. */
async function waiterSessions(name: string): Promise<number[]> {
  const { rows } = await db.pool.query<{ pid: number }>(
    'select pid from pg_stat_activity where application_name = $1 order by pid',
    [`pgonce-waiter ${name}`],
  )
  return rows.map((r) => r.pid)
}

/** A worker of `queue` in a child process, running once it printed 'ready'. */
async function workerChild(queue: string): Promise<Child> {
  const child = spawnFixture('wait-worker-child.ts', { PGONCE_URL: db.url, PGONCE_SCHEMA: db.schema, QUEUE: queue })
  await waitFor(() => child.output().includes('ready'), 30_000, `the worker child of ${queue}\n${child.output()}`)
  return child
}

/** What `waits` resolve with while a worker child of `queue` runs (stopped after). */
async function whileWorkerRuns<T>(queue: string, waits: Promise<T>): Promise<T> {
  const child = await workerChild(queue)
  try {
    return await waits
  } finally {
    child.kill('SIGTERM')
    await exited(child)
  }
}

/** Resolves once `count` jobs of `queue` (or the jobs `ids`) are marked as waited for. */
async function marked(where: { queue: string; count: number } | { ids: string[] }): Promise<void> {
  const [sql, values, count] =
    'ids' in where
      ? ['id = any($1::bigint[])', [where.ids], where.ids.length]
      : ['queue = $1', [where.queue], where.count]
  await waitFor(
    async () =>
      (await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where ${sql} and waited`, values))
        .rows[0].n === count,
    10_000,
    'the marks',
  )
}

/** The job's state, read straight from the table. */
async function stateOf(id: string): Promise<string> {
  return (await db.pool.query(`select state from "${db.schema}".jobs where id = $1`, [id])).rows[0].state
}

describe('queue.waitForJob', () => {
  it('resolves with the completed job and its result, and with a failed one and its error, ended by another process', async () => {
    const queue = queueOf('w_child')
    const done = await queue.add('double', { n: 21 })
    const failing = await queue.add('double', { n: 1, fail: true }, { attempts: 1 })
    // Both waits are listening (and their jobs marked) before the worker exists: only the NOTIFY can end them.
    const waits = [
      queue.waitForJob(done.id, { timeoutMs: 30_000 }),
      queue.waitForJob(failing.id, { timeoutMs: 30_000 }),
    ]
    await waitFor(async () => (await waiterSessions('w_child')).length === 1, 10_000, 'the waiter session')
    await marked({ queue: 'w_child', count: 2 })
    const [completed, failed] = (await whileWorkerRuns('w_child', Promise.all(waits))) as [Job<Data>, Job<Data>]
    expect(completed.state).toBe('completed')
    expect(completed.result).toEqual({ doubled: 42 })
    expect(completed.id).toBe(done.id)
    expect(failed.state).toBe('failed')
    expect(failed.failedReason).toBe('boom 1')
    expect(failed.stacktrace).toContain('boom 1')
    // The last wait ended: its connection is closed.
    await waitFor(async () => (await waiterSessions('w_child')).length === 0, 10_000, 'the waiter session to end')
  })

  it('resolves at once for a job that ended before the wait began, a cancelled one included', async () => {
    const queue = queueOf('w_before')
    const job = await queue.add('x', { n: 1 })
    await db.pool.query(
      `update "${db.schema}".jobs set state = 'completed', result = '7', finished_at = now() where id = $1`,
      [job.id],
    )
    const ended = await queue.waitForJob(job.id, { timeoutMs: 5_000 })
    expect([ended.state, ended.result]).toEqual(['completed', 7])
    const other = await queue.add('x', { n: 2 })
    await queue.cancelJob(other.id)
    const cancelled = await queue.waitForJob(other.id, { timeoutMs: 5_000 })
    expect(cancelled.state).toBe('cancelled')
  })

  it('rejects with WaitForJobTimeoutError naming the job, the timeout and its last state', async () => {
    const queue = queueOf('w_timeout')
    const job = await queue.add('x', { n: 1 })
    const err = await queue.waitForJob(job.id, { timeoutMs: 300 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(WaitForJobTimeoutError)
    expect(err).toMatchObject({ jobId: job.id, timeoutMs: 300, lastState: 'waiting' })
    expect(await stateOf(job.id)).toBe('waiting')
  })

  it('rejects with WaitForJobError NOT_FOUND for a job this queue does not have, and when a waited job is removed', async () => {
    const queue = queueOf('w_missing', { waitPollIntervalMs: 100 })
    await expect(queue.waitForJob('999999999', { timeoutMs: 5_000 })).rejects.toMatchObject({
      name: 'WaitForJobError',
      code: 'NOT_FOUND',
      jobId: '999999999',
    })
    const elsewhere = await queueOf('w_other').add('x', { n: 1 })
    await expect(queue.waitForJob(elsewhere.id, { timeoutMs: 5_000 })).rejects.toBeInstanceOf(WaitForJobError)
    const job = await queue.add('x', { n: 1 })
    const wait = queue.waitForJob(job.id, { timeoutMs: 10_000 }).catch((e: unknown) => e)
    await marked({ ids: [job.id] })
    await queue.removeJob(job.id)
    expect(await wait).toMatchObject({ code: 'NOT_FOUND', jobId: job.id })
  })

  it('never waits for a row lock: a job a transaction holds is read, not marked, and its end is found by the poll', async () => {
    const queue = queueOf('w_locked', { waitPollIntervalMs: 100 })
    const job = await queue.add('x', { n: 1 })
    const holder = new pg.Client({ connectionString: db.url })
    await holder.connect()
    try {
      await holder.query('begin')
      await holder.query(`select id from "${db.schema}".jobs where id = $1 for update`, [job.id])
      // A mark that waited for the lock would never have answered: lastState would be null.
      const err = await queue.waitForJob(job.id, { timeoutMs: 1_000 }).catch((e: unknown) => e)
      expect(err).toMatchObject({ name: 'WaitForJobTimeoutError', lastState: 'waiting' })
      const wait = queue.waitForJob(job.id, { timeoutMs: 20_000 })
      await holder.query(`update "${db.schema}".jobs set state = 'completed', finished_at = now() where id = $1`, [
        job.id,
      ])
      await holder.query('commit')
      expect((await wait).state).toBe('completed')
    } finally {
      await holder.end()
    }
  })

  it('checks its arguments before any I/O', async () => {
    // Nothing listens there: a call that reached the network would fail otherwise, or hang until its timeout.
    const queue = new Queue('w_bad', { connectionString: `postgres://postgres@127.0.0.1:${await freePort()}/x` })
    opened.push(queue as Queue<Data>)
    const bad: [unknown, unknown, string][] = [
      ['abc', { timeoutMs: 1 }, 'id'],
      ['1', undefined, 'options.timeoutMs'],
      ['1', {}, 'options.timeoutMs'],
      ['1', { timeoutMs: 0 }, 'options.timeoutMs'],
      ['1', { timeoutMs: 1.5 }, 'options.timeoutMs'],
      ['1', { timeoutMs: Number.NaN }, 'options.timeoutMs'],
      ['1', { timeoutMs: 1, signal: {} }, 'options.signal'],
      ['1', { timeoutMs: 1, timeout: 5 }, 'options.timeout'],
    ]
    for (const [id, options, field] of bad) {
      const err = await (queue.waitForJob as (id: unknown, o: unknown) => Promise<unknown>)(id, options).catch((e) => e)
      expect(err, field).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).field).toBe(field)
    }
  })

  it('rejects with the reason of an aborted signal, and QUEUE_CLOSED when the Queue closes', async () => {
    const queue = queueOf('w_abort')
    const job = await queue.add('x', { n: 1 })
    const controller = new AbortController()
    const aborted = queue.waitForJob(job.id, { timeoutMs: 30_000, signal: controller.signal }).catch((e: unknown) => e)
    controller.abort(new Error('enough'))
    expect(await aborted).toMatchObject({ message: 'enough' })
    // A reason that is not an Error is the rejection as it is, never taken for the job.
    const other = new AbortController()
    const stopped = queue.waitForJob(job.id, { timeoutMs: 30_000, signal: other.signal }).catch((e: unknown) => e)
    other.abort('stop')
    expect(await stopped).toBe('stop')
    await expect(queue.waitForJob(job.id, { timeoutMs: 1_000, signal: AbortSignal.abort() })).rejects.toBeDefined()
    const pending = queue.waitForJob(job.id, { timeoutMs: 30_000 }).catch((e: unknown) => e)
    await waitFor(async () => (await waiterSessions('w_abort')).length === 1, 10_000, 'the waiter session')
    await queue.close()
    expect(await pending).toMatchObject({ name: 'WaitForJobError', code: 'QUEUE_CLOSED' })
    // The server drops a closed session from pg_stat_activity a moment after the client left.
    await waitFor(async () => (await waiterSessions('w_abort')).length === 0, 10_000, 'no waiter session left')
  })

  it('shares one LISTEN connection among many concurrent waits, and closes it when the last one ends', async () => {
    const queue = queueOf('w_many')
    const jobs = await queue.addBulk(Array.from({ length: 60 }, (_, n) => ({ name: 'x', data: { n } })))
    const waits = jobs.map((j) => queue.waitForJob(j.id, { timeoutMs: 30_000 }))
    await marked({ queue: 'w_many', count: 60 })
    expect(await waiterSessions('w_many')).toHaveLength(1)
    const ended = await whileWorkerRuns('w_many', Promise.all(waits))
    expect(ended.map((j) => j.result)).toEqual(jobs.map((j) => ({ doubled: j.data.n * 2 })))
    await waitFor(async () => (await waiterSessions('w_many')).length === 0, 10_000, 'the waiter session to end')
  })

  it('ends its waits by polling while LISTEN cannot connect', async () => {
    const deadPort = await freePort()
    const queue = queueOf('w_poll', {
      listenConnectionString: `postgres://postgres@127.0.0.1:${deadPort}/test`,
      waitPollIntervalMs: 200,
    })
    const job = await queue.add('double', { n: 5 })
    const wait = queue.waitForJob(job.id, { timeoutMs: 30_000 })
    expect((await whileWorkerRuns('w_poll', wait)).result).toEqual({ doubled: 10 })
  })

  it('replaces a killed LISTEN session and hears the next end through the new one', async () => {
    const queue = queueOf('w_killed')
    const job = await queue.add('double', { n: 4 })
    const wait = queue.waitForJob(job.id, { timeoutMs: 30_000 })
    const [oldPid] = await waitFor(
      async () => {
        const pids = await waiterSessions('w_killed')
        return pids.length === 1 ? pids : undefined
      },
      10_000,
      'the waiter session',
    )
    expect(await terminate(db.pool, oldPid!)).toBe(true)
    await waitFor(
      async () => {
        const pids = await waiterSessions('w_killed')
        return pids.length === 1 && pids[0] !== oldPid
      },
      10_000,
      'a new waiter session',
    )
    expect((await whileWorkerRuns('w_killed', wait)).result).toEqual({ doubled: 8 })
  })

  it('NOTIFYs the end of a job that is waited for, and sends nothing for one that is not', async () => {
    const queue = queueOf('w_cost')
    const [plain, waited] = await queue.addBulk([
      { name: 'x', data: { n: 1 } },
      { name: 'x', data: { n: 2 } },
    ])
    const wait = queue.waitForJob(waited!.id, { timeoutMs: 30_000 }).catch((e: Error) => e)
    const listener = new pg.Client({ connectionString: db.url })
    await listener.connect()
    const heard: string[] = []
    // The Queue's LISTEN connection probes the channel when it connects ('!probe …'): not a job's end.
    listener.on('notification', (m) => {
      if (!m.payload?.startsWith('!probe ')) heard.push(m.payload ?? '')
    })
    try {
      await listener.query(`listen "pgonce:${db.schema}:done"`)
      await marked({ ids: [waited!.id] })
      // An operator's UPDATE ends both; the marker, sent after, is delivered after anything they sent.
      await db.pool.query(`update "${db.schema}".jobs set state = 'completed', finished_at = now() where id = $1`, [
        plain!.id,
      ])
      await db.pool.query(`select pg_notify($1, 'marker')`, [`pgonce:${db.schema}:done`])
      await waitFor(() => heard.includes('marker'), 5_000, 'the marker')
      expect(heard).toEqual(['marker'])
      await db.pool.query(`update "${db.schema}".jobs set state = 'failed', finished_at = now() where id = $1`, [
        waited!.id,
      ])
      await waitFor(() => heard.length === 2, 5_000, 'the NOTIFY of the waited job')
      expect(heard[1]).toBe(waited!.id)
      expect(await wait).toMatchObject({ state: 'failed' })
    } finally {
      await listener.end()
    }
  })
})
