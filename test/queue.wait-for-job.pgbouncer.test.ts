// queue.waitForJob behind a transaction-mode PgBouncer: its LISTEN through the pooler hears nothing, finds it out with a
// probe NOTIFY and says so, and its waits still end, by polling; with listenConnectionString straight to PostgreSQL
// they end on the NOTIFY.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Logger, Queue, type QueueOptions } from '../src/index.js'
import { type Bouncer, PGBOUNCER_INSTALL_HINT, pgbouncerBinary, startPgbouncer } from './helpers/pgbouncer.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'

const binary = await pgbouncerBinary()
if (binary === null && process.env.REQUIRE_PGBOUNCER === '1')
  throw new Error(`pgbouncer is not installed but REQUIRE_PGBOUNCER=1: ${PGBOUNCER_INSTALL_HINT}`)
if (binary === null)
  process.stderr.write('[queue.wait-for-job.pgbouncer.test.ts] skipped: pgbouncer is not installed\n')

describe.skipIf(binary === null)('queue.waitForJob behind a transaction-mode pooler', () => {
  let db: TestSchema
  let bouncer: Bouncer

  beforeAll(async () => {
    db = await freshSchema('wait_pooler')
    bouncer = await startPgbouncer(binary as string, db.url, 4)
  })
  afterAll(async () => {
    await bouncer?.stop()
    await db?.drop()
  })

  /** A Queue through the pooler, its warnings collected. */
  function pooledQueue(name: string, options: Partial<QueueOptions>): { queue: Queue; warnings: string[] } {
    const warnings: string[] = []
    const logger: Logger = {
      debug: () => {},
      info: () => {},
      warn: (_o, msg) => void warnings.push(String(msg)),
      error: () => {},
      child: () => logger,
    }
    const queue = new Queue(name, {
      connectionString: bouncer.url,
      schema: db.schema,
      preparedStatements: false,
      migrate: false,
      logger,
      ...options,
    })
    return { queue, warnings }
  }

  /** Ends job `id` as an operator would, from the test's own connection. */
  const complete = (id: string) =>
    db.pool.query(
      `update "${db.schema}".jobs set state = 'completed', result = '1', finished_at = now() where id = $1`,
      [id],
    )

  it('without listenConnectionString: the LISTEN is found deaf and said so, and the wait ends by polling', async () => {
    const { queue, warnings } = pooledQueue('w_pooled', { waitPollIntervalMs: 300 })
    try {
      const job = await queue.add('x', {})
      const wait = queue.waitForJob(job.id, { timeoutMs: 20_000 })
      await waitFor(() => warnings.some((m) => m.includes('heard no NOTIFY')), 10_000, 'the deaf LISTEN to be reported')
      await complete(job.id)
      expect((await wait).state).toBe('completed')
    } finally {
      await queue.close()
    }
  })

  it('with listenConnectionString straight to PostgreSQL: the wait ends on the NOTIFY', async () => {
    // An hour's poll: only the NOTIFY can end the wait within the test.
    const { queue, warnings } = pooledQueue('w_direct', {
      listenConnectionString: db.url,
      waitPollIntervalMs: 3_600_000,
    })
    try {
      const job = await queue.add('x', {})
      const wait = queue.waitForJob(job.id, { timeoutMs: 20_000 })
      await waitFor(
        async () =>
          (await db.pool.query(`select waited from "${db.schema}".jobs where id = $1`, [job.id])).rows[0].waited,
        10_000,
        'the mark',
      )
      await complete(job.id)
      expect((await wait).result).toBe(1)
      expect(warnings).toEqual([])
    } finally {
      await queue.close()
    }
  })
})
