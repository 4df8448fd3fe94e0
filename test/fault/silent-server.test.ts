// Fault suite, a server that accepts connections and never answers: one that never answers at all (a black hole), and a
// proxy to the real PostgreSQL that stops forwarding after the handshake. Guarantee (docs/operations.md, "Bounded
// waits"): a pending call rejects with a DatabaseTimeoutError naming host:port and the bound, keeping pg's error as
// `cause` and no password; Queue, Effects and Worker close() return within their bounds whatever the server does; the
// Worker reports the failures on 'error' and, once the server answers again, completes jobs.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { DatabaseTimeoutError, Effects, Queue, Worker } from '../../src/index.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'
import { type Silent, type StallingProxy, blackHole, stallingProxy } from '../helpers/silent-server.js'
import { waitFor } from '../helpers/wait.js'

const PASSWORD = 's3cr3t-pw'
/** Short bounds: connects give up after 300 ms, answers after 300 ms + the 2 s grace. */
const BOUNDS = { connectTimeoutMs: 300, statementTimeoutMs: 300 }
const ANSWER_MS = 2_300
/** Slack for a loaded test machine on top of each bound. */
const SLACK_MS = 1_500

const closers: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {})
})

/** How long `promise` took to settle, and its rejection (or null). */
async function timed(promise: Promise<unknown>): Promise<{ ms: number; err: unknown }> {
  const t0 = performance.now()
  try {
    await promise
    return { ms: performance.now() - t0, err: null }
  } catch (err) {
    return { ms: performance.now() - t0, err }
  }
}

function expectTimeout(err: unknown, code: DatabaseTimeoutError['code'], port: number, timeoutMs: number): void {
  expect(err).toBeInstanceOf(DatabaseTimeoutError)
  const e = err as DatabaseTimeoutError
  expect(e.code).toBe(code)
  expect(e.server).toBe(`127.0.0.1:${port}`)
  expect(e.timeoutMs).toBe(timeoutMs)
  expect(e.message).toContain(`127.0.0.1:${port}`)
  expect(e.message).toContain(`${timeoutMs} ms`)
  expect(e.cause).toBeInstanceOf(Error)
  expect(`${e.message} ${e.stack} ${JSON.stringify(e)}`).not.toContain(PASSWORD)
}

/** `close()` of a Queue with an add in flight returns within its bound (an answer's, and a second to drop connections); the add fails. */
async function closesWithAddPending(queue: Queue): Promise<void> {
  const pending = timed(queue.add('b', {}))
  const closed = await timed(queue.close())
  expect(closed.err).toBeNull()
  expect(closed.ms).toBeLessThan(ANSWER_MS + 1_000 + SLACK_MS)
  expect((await pending).err).toBeInstanceOf(Error)
}

describe('a server that accepts connections and never answers', () => {
  let hole: Silent
  let url: string
  beforeAll(async () => {
    hole = await blackHole()
    url = `postgres://app:${PASSWORD}@127.0.0.1:${hole.port}/app`
  })
  afterAll(() => hole?.close())

  it('queue.add rejects with a DatabaseTimeoutError within connectTimeoutMs; close() returns within its bound with an add pending', async () => {
    const queue = new Queue('silent', { connectionString: url, ...BOUNDS })
    closers.push(() => queue.close())
    const { ms, err } = await timed(queue.add('a', {}))
    expectTimeout(err, 'CONNECT_TIMEOUT', hole.port, 300)
    expect(ms).toBeLessThan(300 + SLACK_MS)

    await closesWithAddPending(queue)
  })

  it('effects.runOnce rejects with it, the work never runs, and close() returns', async () => {
    const effects = new Effects({ connectionString: url, ...BOUNDS })
    closers.push(() => effects.close())
    let ran = false
    const { ms, err } = await timed(effects.runOnce('k', () => void (ran = true)))
    expectTimeout(err, 'CONNECT_TIMEOUT', hole.port, 300)
    expect(ms).toBeLessThan(300 + SLACK_MS)
    expect(ran).toBe(false)
    const closed = await timed(effects.close())
    expect(closed.ms).toBeLessThan(ANSWER_MS + 1_000 + SLACK_MS)
  })

  it("a Worker emits 'error' with it, keeps retrying, and close() returns within its bound", async () => {
    const errors: Error[] = []
    const worker = new Worker('silent', async () => {}, {
      connectionString: url,
      ...BOUNDS,
      closeTimeoutMs: 200,
      pollIntervalMs: 100,
    })
    worker.on('error', (e) => errors.push(e))
    closers.push(() => worker.close())
    await waitFor(() => errors.length >= 2, 10_000, 'two reported failures (it retries)')
    expectTimeout(errors[0], 'CONNECT_TIMEOUT', hole.port, 300)
    const closed = await timed(worker.close())
    expect(closed.err).toBeNull()
    expect(closed.ms).toBeLessThan(200 + ANSWER_MS + 1_000 + SLACK_MS)
  })
})

describe('a proxy to PostgreSQL that stops forwarding after the handshake', () => {
  let db: TestSchema
  let proxy: StallingProxy
  let url: string
  beforeAll(async () => {
    db = await freshSchema('silent_proxy')
    proxy = await stallingProxy(db.url)
    const via = new URL(db.url)
    via.host = `127.0.0.1:${proxy.port}`
    url = via.href
  })
  afterAll(async () => {
    await proxy?.close()
    await db?.drop()
  })

  it('an add on a connection gone silent rejects with ANSWER_TIMEOUT naming the statement; close() returns with an add pending', async () => {
    proxy.resume()
    const queue = new Queue('stalled', {
      connectionString: url,
      schema: db.schema,
      migrate: false,
      poolSize: 2,
      ...BOUNDS,
    })
    closers.push(() => queue.close())
    await queue.add('warm', {})
    proxy.stall()
    const { ms, err } = await timed(queue.add('a', {}))
    expectTimeout(err, 'ANSWER_TIMEOUT', proxy.port, ANSWER_MS)
    expect((err as DatabaseTimeoutError).statement).toBe('add-plain-job')
    expect(ms).toBeGreaterThanOrEqual(ANSWER_MS - 50)
    expect(ms).toBeLessThan(ANSWER_MS + SLACK_MS)

    await closesWithAddPending(queue)
  })

  it("a Worker reports the silence on 'error', completes jobs once the proxy forwards again, and closes within its bound while it is silent", async () => {
    proxy.resume()
    const producer = new Queue('stalled-worker', { connectionString: db.url, schema: db.schema, migrate: false })
    closers.push(() => producer.close())
    const done = new Set<string>()
    const errors: Error[] = []
    const worker = new Worker('stalled-worker', async (job) => void done.add(job.id), {
      connectionString: url,
      schema: db.schema,
      migrate: false,
      ...BOUNDS,
      closeTimeoutMs: 200,
      pollIntervalMs: 100,
      maintenanceIntervalMs: 0,
    })
    worker.on('error', (e) => errors.push(e))
    closers.push(() => worker.close())
    await worker.run()
    const first = await producer.add('j', {})
    await waitFor(() => done.has(first.id), 10_000, 'the first job through the proxy')

    proxy.stall()
    const stalledJob = await producer.add('j', {})
    await waitFor(
      () => errors.some((e) => e instanceof DatabaseTimeoutError),
      15_000,
      "a DatabaseTimeoutError on 'error'",
    )
    const timeout = errors.find((e) => e instanceof DatabaseTimeoutError) as DatabaseTimeoutError
    expect(timeout.server).toBe(`127.0.0.1:${proxy.port}`)
    expect(done.has(stalledJob.id)).toBe(false)

    proxy.resume()
    await waitFor(() => done.has(stalledJob.id), 30_000, 'the job added while silent, once the proxy forwards again')
    const later = await producer.add('j', {})
    await waitFor(() => done.has(later.id), 30_000, 'a job added after the recovery')

    proxy.stall()
    await producer.add('j', {})
    const closed = await timed(worker.close())
    expect(closed.err).toBeNull()
    expect(closed.ms).toBeLessThan(200 + ANSWER_MS + 1_000 + SLACK_MS)
  })
})
