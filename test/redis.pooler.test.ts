// Behind a transaction-mode PgBouncer a LISTEN hears nothing: the cache listener finds it out with a probe NOTIFY,
// says so, and the layer never answers from Redis there (with a Worker's listenConnectionString straight to Postgres, it does).

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Logger, Queue, Worker } from '../src/index.js'
import { type Bouncer, PGBOUNCER_INSTALL_HINT, pgbouncerBinary, startPgbouncer } from './helpers/pgbouncer.js'
import { REDIS_URL, deleteSchemaKeys, redisAvailable, testClient } from './helpers/redis-support.js'
import { waitFor } from './helpers/wait.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

const ok = await redisAvailable('redis.pooler.test.ts')
const binary = await pgbouncerBinary()
if (binary === null && process.env.REQUIRE_PGBOUNCER === '1')
  throw new Error(`pgbouncer is not installed but REQUIRE_PGBOUNCER=1: ${PGBOUNCER_INSTALL_HINT}`)
if (binary === null) process.stderr.write('[redis.pooler.test.ts] skipped: pgbouncer is not installed\n')

describe.skipIf(!ok || binary === null)('the Redis layer behind a transaction-mode pooler', () => {
  let db: TestSchema
  let bouncer: Bouncer
  const TTL = 3_600_000

  beforeAll(async () => {
    db = await freshSchema('redis_pooler')
    bouncer = await startPgbouncer(binary as string, db.url, 4)
  })
  afterAll(async () => {
    await bouncer?.stop()
    if (db !== undefined) {
      const redis = testClient(REDIS_URL as string)
      await deleteSchemaKeys(redis, db.schema)
      redis.disconnect()
      await db.drop()
    }
  })

  it('the listener hears no NOTIFY through it: an error is logged, every answer comes from Postgres', async () => {
    const errors: string[] = []
    const logger: Logger = {
      debug: () => {},
      info: () => {},
      warn: () => {},
      error: (_o, msg) => {
        errors.push(String(msg))
      },
      child: () => logger,
    }
    const queue = new Queue('pooled', {
      connectionString: bouncer.url,
      schema: db.schema,
      preparedStatements: false,
      redis: REDIS_URL,
      logger,
    })
    try {
      const first = await queue.add('push', {}, { deduplication: { id: 'k', ttl: TTL } })
      await waitFor(() => errors.some((m) => m.includes('does not hear NOTIFYs')), 10_000, 'the listener to give up')
      for (let i = 0; i < 20; i++)
        expect((await queue.add('push', {}, { deduplication: { id: 'k', ttl: TTL } })).id).toBe(first.id)
      expect(await queue.removeDeduplicationKey('k')).toBe(true)
      expect((await queue.add('push', {}, { deduplication: { id: 'k', ttl: TTL } })).outcome).toBe('added')
      expect(queue.cacheOutcomes.get('hit')).toBe(0)
    } finally {
      await queue.close()
    }
  })

  it('a Worker with listenConnectionString straight to Postgres: its listener hears, and ctx.runOnce is answered from Redis', async () => {
    const queue = new Queue<{ n: number }>('pooled-worker', {
      connectionString: bouncer.url,
      schema: db.schema,
      preparedStatements: false,
    })
    const done: string[] = []
    const worker = new Worker<{ n: number }>(
      'pooled-worker',
      async (_job, ctx) => {
        done.push(await ctx.runOnce('once', () => {}))
      },
      {
        connectionString: bouncer.url,
        listenConnectionString: db.url,
        schema: db.schema,
        preparedStatements: false,
        redis: REDIS_URL,
        pollIntervalMs: 50,
        migrate: false,
      },
    )
    try {
      // Ready before the first add (it listens and has claimed once): the timed waits below are the job's, not the start's.
      await worker.run()
      await waitFor(
        async () => {
          // Counted before the add: a job handed to the idle worker can run before add() returns.
          const before = done.length
          await queue.add('run', { n: before })
          await waitFor(() => done.length > before, 20_000, 'the job to run')
          return worker.cacheOutcomes.get('hit') > 0
        },
        40_000,
        'a runOnce answered from Redis',
      )
      expect(done[0]).toBe('ran')
      expect(done.slice(1).every((d) => d === 'duplicate-done')).toBe(true)
    } finally {
      await worker.close()
      await queue.close()
    }
  })
})
