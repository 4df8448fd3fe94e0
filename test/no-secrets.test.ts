// Nothing pgonce hands out leaks the database password (docs/observability.md, "Logging"): jobs, Queue, Worker,
// Effects, a handler's ctx, event arguments, errors (a failed statement's too), pgonce's own log lines, span
// attributes and the CLI's output, each through pino, JSON.stringify and util.inspect, with a role whose password the test made.

import { randomBytes } from 'node:crypto'
import { Writable } from 'node:stream'
import { inspect } from 'node:util'
import { trace } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, type Logger, QueryTimeoutError, Queue, ValidationError, Worker, migrate } from '../src/index.js'
import { buildCli, runCli } from './helpers/cli-support.js'
import { waitFor } from './helpers/wait.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

const role = `pgonce_secret_${randomBytes(4).toString('hex')}`
const password = `s3cr3t-${randomBytes(8).toString('hex')}`
const spans = new InMemorySpanExporter()
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] })

let db: TestSchema
/** The test database, reached as `role` with its password in the URL. */
let secretUrl: string
/** A schema the role owns, migrated through secretUrl. */
let schema: string
let main: string
const closers: { close(): Promise<void> }[] = []

/** Everything pino writes: pgonce's own log lines (its logger option) and the test's. */
let logged = ''
const pinoLogger = pino(
  { level: 'debug' },
  new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged += chunk.toString()
      done()
    },
  }),
)

/** pgonce's logger: pino, and util.inspect of every object logged (as a console-based logger would print it). */
function inspecting(inner: pino.Logger): Logger {
  const level = (name: 'debug' | 'info' | 'warn' | 'error') => (obj: object | string, msg?: string) => {
    inner[name](obj, msg)
    logged += `${inspect(obj, { depth: 12, showHidden: true })}\n`
  }
  return {
    debug: level('debug'),
    info: level('info'),
    warn: level('warn'),
    error: level('error'),
    child: (b) => inspecting(inner.child(b)),
  }
}
const logger = inspecting(pinoLogger)

beforeAll(async () => {
  trace.setGlobalTracerProvider(tracerProvider)
  db = await freshSchema('no_secrets')
  await db.pool.query(`create role "${role}" login password '${password}'`)
  await db.pool.query(`grant create on database "${new URL(db.url).pathname.slice(1)}" to "${role}"`)
  const url = new URL(db.url)
  url.username = role
  url.password = password
  secretUrl = url.href
  schema = `${db.schema}_own`
  await migrate({ connectionString: secretUrl, schema })
  main = await buildCli()
})
afterAll(async () => {
  await Promise.all(closers.map((c) => c.close()))
  await db.pool.query(`drop schema if exists "${schema}" cascade`)
  await db.pool.query(`drop owned by "${role}"`)
  await db.pool.query(`drop role "${role}"`)
  await db.drop()
  await tracerProvider.shutdown()
})

function opened<T extends { close(): Promise<void> }>(thing: T): T {
  closers.push(thing)
  return thing
}

const options = () => ({ connectionString: secretUrl, schema, logger })

/** The ways an application turns what pgonce gave it into text: a pino line, JSON, util.inspect with hidden fields. */
function renderings(label: string, value: unknown): string[] {
  const start = logged.length
  pinoLogger.info({ [label]: value }, 'rendered')
  const line = logged.slice(start)
  return [line, inspect(value, { depth: 12, showHidden: true })]
}

function expectNoSecret(what: string, text: string): void {
  expect(text.includes(password), `${what} holds the password`).toBe(false)
  expect(text.includes(secretUrl), `${what} holds the connection string`).toBe(false)
}

function expectRendersClean(label: string, value: unknown): void {
  for (const text of renderings(label, value)) expectNoSecret(label, text)
}

/** Runs `fn` on a connection of the test pool holding an exclusive lock on the role schema's jobs table. */
async function withJobsLocked<T>(fn: () => Promise<T>): Promise<T> {
  const client = await db.pool.connect()
  try {
    await client.query('begin')
    await client.query(`lock table "${schema}".jobs in access exclusive mode`)
    return await fn()
  } finally {
    await client.query('rollback')
    client.release()
  }
}

describe('nothing pgonce hands out holds the password', () => {
  it('a Job is plain data: JSON.stringify round-trips its public fields, pino and util.inspect show no Queue', async () => {
    const queue = opened(new Queue<{ to: string }>('mail', options()))
    const job = await queue.add('send', { to: 'ann@example.com' }, { jobId: 'welcome-ann' })
    const json = JSON.parse(JSON.stringify(job)) as Record<string, unknown>
    expect(json).toEqual({
      id: job.id,
      jobId: 'welcome-ann',
      name: 'send',
      queue: 'mail',
      data: { to: 'ann@example.com' },
      state: 'waiting',
      attempts: 0,
      maxAttempts: 1,
      priority: 0,
      backoff: null,
      runAt: job.runAt.toISOString(),
      createdAt: job.createdAt.toISOString(),
      startedAt: null,
      finishedAt: null,
      result: null,
      progress: null,
      cancelRequestedAt: null,
      timeoutMs: null,
      deduplicationId: null,
      failedReason: null,
      stacktrace: null,
      deduplicated: false,
      outcome: 'added',
    })
    expectRendersClean('job', job)
    expectRendersClean('read', await queue.getJob(job.id))
    expectRendersClean('page', await queue.getJobs())
    expectRendersClean('queue', queue)
    // The Job still reaches its Queue where it needs to.
    expect(await job.removeDeduplicationKey()).toBe(false)
  })

  it('an Effects, and the errors of bad input, a refused call and a statement the server stopped', async () => {
    const effects = opened(new Effects(options()))
    expect(await effects.runOnce('k', () => {})).toBe('ran')
    expectRendersClean('effects', effects)
    const queue = opened(new Queue('errors', options()))
    const errors: unknown[] = []
    errors.push(await queue.add('', {}).catch((e: unknown) => e))
    const waiting = await queue.add('x', {})
    errors.push(await queue.retryJob(waiting.id).catch((e: unknown) => e))
    // A statement stopped by the server: an add blocked on a lock, cancelled once pg_stat_activity shows it waiting.
    const stopped = await withJobsLocked(async () => {
      const add = queue.add('x', {}).catch((e: unknown) => e)
      await waitFor(
        async () =>
          (
            await db.pool.query(
              `select pg_cancel_backend(pid) from pg_stat_activity where usename = $1 and wait_event_type = 'Lock'`,
              [role],
            )
          ).rowCount === 1,
        10_000,
        'the add to wait for the lock',
      )
      return add
    })
    errors.push(stopped)
    expect(errors.map((e) => (e as Error).name)).toEqual(['ValidationError', 'RetryJobError', 'QueryTimeoutError'])
    expect(errors[0]).toBeInstanceOf(ValidationError)
    expect((stopped as QueryTimeoutError).cause).toBeInstanceOf(Error)
    for (const err of errors) expectRendersClean('err', err)
  })

  it("a Worker, its handler's job and ctx, its events, its log lines and an idle connection the server ended", async () => {
    const queue = opened(new Queue<{ n: number }>('work', options()))
    const seen: [string, unknown][] = []
    const worker = opened(
      new Worker<{ n: number }>(
        'work',
        async (job, ctx) => {
          seen.push(['handler job', job], ['ctx', ctx])
          ctx.logger.info({ job, ctx }, 'handler ran')
          if (job.data.n === 2) throw new Error('second job fails')
          return { ok: job.data.n }
        },
        { ...options(), pollIntervalMs: 100 },
      ),
    )
    worker.on('completed', (job, result) => seen.push(['completed', [job, result]]))
    worker.on('failed', (job, err) => seen.push(['failed', [job, err]]))
    worker.on('error', (err) => seen.push(['error', err]))
    await queue.add('a', { n: 1 })
    await queue.add('a', { n: 2 })
    await waitFor(
      () => seen.filter(([what]) => what === 'completed' || what === 'failed').length === 2,
      15_000,
      'both runs to end',
    )
    // The server ends every session of the role: the LISTEN connection and the pools' idle ones (pg-pool puts the
    // idle client on the error it emits), each reported or logged by pgonce with its error.
    logged = ''
    await db.pool.query('select pg_terminate_backend(pid) from pg_stat_activity where usename = $1', [role])
    await waitFor(
      () => logged.includes('terminating connection'),
      15_000,
      'pgonce to log a connection the server ended',
    )
    // An add may still check out a connection whose termination its pool has not processed yet: it fails (nothing
    // written) and the next one gets a fresh connection.
    await waitFor(
      () =>
        queue.add('a', { n: 3 }).then(
          () => true,
          () => false,
        ),
      15_000,
      'an add after the terminations',
    )
    await waitFor(() => seen.filter(([what]) => what === 'completed').length === 2, 15_000, 'a run after the reconnect')
    expect(seen.map(([what]) => what)).toEqual(expect.arrayContaining(['handler job', 'ctx', 'completed', 'failed']))
    for (const [what, value] of seen) expectRendersClean(what, value)
    expectRendersClean('worker', worker)
    expect(JSON.parse(JSON.stringify(seen.find(([what]) => what === 'ctx')?.[1]))).toMatchObject({
      jobName: 'a',
      attempt: 1,
    })
    await worker.close()
    expectNoSecret('the log', logged)
  })

  it('span attributes and recorded exceptions', async () => {
    const queue = opened(new Queue('spans', options()))
    const worker = opened(
      new Worker(
        'spans',
        async () => {
          throw new Error('fails')
        },
        { ...options(), pollIntervalMs: 100 },
      ),
    )
    const failed = new Promise((resolve) => worker.once('failed', resolve))
    await queue.add('x', {})
    await failed
    const finished = spans.getFinishedSpans()
    expect(finished.map((s) => s.name)).toEqual(expect.arrayContaining(['add spans', 'process spans']))
    expectNoSecret(
      'spans',
      JSON.stringify(
        finished.map((s) => ({ name: s.name, attributes: s.attributes, events: s.events, status: s.status })),
      ),
    )
  })
})

describe('the CLI never prints the password', () => {
  const cli = (url: string, ...args: string[]) => runCli(main, [...args, '--schema', schema], { DATABASE_URL: url })

  it('in its --json output and in its errors', async () => {
    const queue = opened(new Queue('cli', options()))
    const job = await queue.add('x', { a: 1 })
    const results = await Promise.all([
      cli(secretUrl, 'stats', '--json'),
      cli(secretUrl, 'jobs', 'show', job.id, '--queue', 'cli', '--json'),
      cli(secretUrl, 'pause', 'cli', '--json'),
      cli(secretUrl, 'jobs', 'show', '99999', '--queue', 'cli'),
      runCli(main, ['stats', '--schema', 'no_such_schema'], { DATABASE_URL: secretUrl }),
      cli(Object.assign(new URL(secretUrl), { port: '1' }).href, 'stats'),
      cli(`${secretUrl}?sslmode=require`, 'stats'),
      cli(secretUrl.replace('127.0.0.1', 'no-such-host.invalid'), 'stats'),
      cli(secretUrl, 'stats', '--connect-timeout', 'soon'),
    ])
    expect(results.map((r) => r.code)).toEqual([0, 0, 0, 1, 1, 1, 1, 1, 2])
    for (const r of results) expectNoSecret('CLI output', r.stdout + r.stderr)
    expect(JSON.parse(results[1]?.stdout ?? '')).toMatchObject({ id: job.id, data: { a: 1 } })
  })
})
