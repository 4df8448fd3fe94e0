// A removed key is never answered as held: a completed owner's cached key removed (by a process without redis, by SQL through remove_dedup_key(), by a Queue with redis in another process), then added again at once, 100 times each under CPU load; a bare SQL delete is answered stale only within the lease.

import { performance } from 'node:perf_hooks'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { waitForState } from './helpers/jobs.js'
import {
  type QueueChild,
  REDIS_URL,
  busyChild,
  deleteSchemaKeys,
  redisAvailable,
  spawnQueueChild,
  testClient,
  untilCached,
} from './helpers/redis-support.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

type Payload = { v: string }
const QUEUE = 'readd'
const TTL = 3_600_000
const ROUNDS = 100
/** Rounds run in this many lanes at once, each with a Queue (and a cache) of its own. */
const LANES = 4
/** The bound docs/redis.md states: an end Redis was not told of is answered at most this long after its commit. */
const LEASE_MS = 100

const ok = await redisAvailable('redis.remove-readd.test.ts')

describe.skipIf(!ok)('a cached key removed, then added again at once', () => {
  let db: TestSchema
  let sql: pg.Pool
  let redis: ReturnType<typeof testClient>
  let lanes: Queue<Payload>[]
  let worker: Worker<Payload>
  let withRedis: QueueChild
  let withoutRedis: QueueChild
  let load: { stop(): Promise<void> }

  beforeAll(async () => {
    db = await freshSchema('redis_readd')
    // Few connections each: the test server is shared (max_connections).
    sql = new pg.Pool({ connectionString: db.url, max: 2 })
    redis = testClient(REDIS_URL as string)
    lanes = Array.from(
      { length: LANES },
      () =>
        new Queue<Payload>(QUEUE, {
          connectionString: db.url,
          schema: db.schema,
          redis: REDIS_URL,
          migrate: false,
          poolSize: 2,
        }),
    )
    worker = new Worker<Payload>(QUEUE, async () => {}, {
      connectionString: db.url,
      schema: db.schema,
      concurrency: 4,
      poolSize: 3,
      pollIntervalMs: 100,
      maintenanceIntervalMs: 0,
      migrate: false,
    })
    const env = { PGONCE_URL: db.url, PGONCE_SCHEMA: db.schema, QUEUE }
    ;[withRedis, withoutRedis] = await Promise.all([
      spawnQueueChild({ ...env, CHILD_REDIS_URL: REDIS_URL }),
      spawnQueueChild(env),
    ])
    await Promise.all([withRedis.send({ op: 'ping' }), withoutRedis.send({ op: 'ping' })])
    load = busyChild()
  })
  afterAll(async () => {
    await load?.stop()
    await withRedis?.close()
    await withoutRedis?.close()
    await worker?.close()
    for (const q of lanes ?? []) await q.close()
    await sql?.end()
    if (redis !== undefined) {
      await deleteSchemaKeys(redis, db.schema)
      redis.disconnect()
    }
    await db?.drop()
  })

  const add = (q: Queue<Payload>, key: string, v: string) =>
    q.add('push', { v }, { deduplication: { id: key, ttl: TTL } })

  /** ROUNDS keys of `label`, each held with a TTL by an owner the worker completed, added by the lane that will use it. */
  async function completedOwners(label: string): Promise<string[]> {
    const owners = await Promise.all(
      Array.from({ length: ROUNDS }, (_, i) => add(lanes[i % LANES] as Queue<Payload>, `${label}:${i}`, 'owner')),
    )
    await Promise.all(owners.map((o) => waitForState(db, o.id, 'completed')))
    return owners.map((o) => o.id)
  }

  /**
   * Makes the key's duplicates answered from Redis; true once a duplicate was (the lane's cache is trusted), false if
   * none of 20 in a row was (a loaded machine can let the listener's lease lapse for a moment).
   */
  async function cached(q: Queue<Payload>, key: string, ownerId: string): Promise<boolean> {
    await untilCached(redis, db.pool, db.schema, QUEUE, key, async () =>
      expect((await add(q, key, 'dup')).id).toBe(ownerId),
    )
    for (let tries = 0; tries < 20; tries++) {
      const hits = q.cacheOutcomes.get('hit')
      expect((await add(q, key, 'dup')).id).toBe(ownerId)
      if (q.cacheOutcomes.get('hit') > hits) return true
      await new Promise((r) => setTimeout(r, 25))
    }
    return false
  }

  /**
   * ROUNDS rounds over the lanes: a completed owner's key answered from Redis, `remove`, then at once the same add,
   * handed to `check` with the owner's id and the moment `remove` returned.
   */
  async function rounds(
    label: string,
    remove: (key: string) => Promise<unknown>,
    check: (q: Queue<Payload>, key: string, ownerId: string, removedAt: number) => Promise<void>,
  ): Promise<void> {
    const owners = await completedOwners(label)
    let hits = 0
    await Promise.all(
      lanes.map(async (q, lane) => {
        for (let i = lane; i < ROUNDS; i += LANES) {
          const key = `${label}:${i}`
          if (await cached(q, key, owners[i] as string)) hits++
          await remove(key)
          await check(q, key, owners[i] as string, performance.now())
        }
      }),
    )
    // Most rounds had the key answered from Redis just before its removal, or the test would prove little.
    expect(hits).toBeGreaterThanOrEqual(ROUNDS * 0.8)
  }

  /** Removes by `remove`; every add at once after it must be a new job. */
  async function noStaleAnswer(label: string, remove: (key: string) => Promise<unknown>): Promise<void> {
    let stale = 0
    await rounds(label, remove, async (q, key, ownerId) => {
      const again = await add(q, key, 'again')
      if (again.id === ownerId) stale++
      else expect(again.outcome).toBe('added')
    })
    expect(stale).toBe(0)
  }

  it('removed by a Queue without redis in another process: 0 stale answers in 100', async () => {
    await noStaleAnswer('plain', (key) => withoutRedis.send({ op: 'remove', key }))
  })

  it('removed by SQL through call remove_dedup_key(): 0 stale answers in 100', async () => {
    await noStaleAnswer('sql-call', (key) => sql.query(`call "${db.schema}".remove_dedup_key($1, $2)`, [QUEUE, key]))
  })

  it('removed by a Queue with redis in another process: 0 stale answers in 100', async () => {
    await noStaleAnswer('redis', (key) => withRedis.send({ op: 'remove', key }))
  })

  it('removed by a bare SQL DELETE: stale answers only from calls started within the lease after its commit', async () => {
    let stale = 0
    let latestMs = 0
    await rounds(
      'sql-delete',
      (key) => sql.query(`delete from "${db.schema}".dedup_keys where queue = $1 and key = $2`, [QUEUE, key]),
      async (q, key, ownerId, committed) => {
        for (;;) {
          const started = performance.now()
          if ((await add(q, key, 'again')).id !== ownerId) return
          stale++
          latestMs = Math.max(latestMs, started - committed)
        }
      },
    )
    expect(latestMs, `${stale} stale answers, the latest ${latestMs.toFixed(1)} ms after the commit`).toBeLessThan(
      LEASE_MS,
    )
  })
})
