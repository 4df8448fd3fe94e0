// A cached duplicate is never answered once its key is gone: ended through pgonce, with Redis or without (any process: no window once the call returns), or from outside (SQL, a caller's transaction, TRUNCATE, a restore: until the NOTIFY arrives, within the lease).

import { performance } from 'node:perf_hooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Job, Queue } from '../src/index.js'
import {
  type QueueChild,
  REDIS_URL,
  deleteSchemaKeys,
  redisAvailable,
  spawnQueueChild,
  testClient,
} from './helpers/redis-support.js'
import { waitFor } from './helpers/wait.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

type Payload = { v: string }
const QUEUE = 'inval'
const TTL = 3_600_000
/** How long an out-of-band end may still be answered from Redis here (the NOTIFY of its commit, with room for a loaded machine). */
const WINDOW_MS = 1_000

const ok = await redisAvailable('redis.invalidation.test.ts')

describe.skipIf(!ok)('invalidation of cached duplicates', () => {
  let db: TestSchema
  let queue: Queue<Payload>
  let redis: ReturnType<typeof testClient>
  let withRedis: QueueChild
  let withoutRedis: QueueChild
  let seq = 0

  beforeAll(async () => {
    db = await freshSchema('redis_inval')
    redis = testClient(REDIS_URL as string)
    queue = new Queue<Payload>(QUEUE, { connectionString: db.url, schema: db.schema, redis: REDIS_URL })
    const env = { PGONCE_URL: db.url, PGONCE_SCHEMA: db.schema, QUEUE }
    ;[withRedis, withoutRedis] = await Promise.all([
      spawnQueueChild({ ...env, CHILD_REDIS_URL: REDIS_URL }),
      spawnQueueChild(env),
    ])
    await Promise.all([withRedis.send({ op: 'ping' }), withoutRedis.send({ op: 'ping' })])
  })
  afterAll(async () => {
    await withRedis?.close()
    await withoutRedis?.close()
    await queue?.close()
    if (redis !== undefined) {
      await deleteSchemaKeys(redis, db.schema)
      redis.disconnect()
    }
    await db?.drop()
  })

  const add = (key: string, v = 'dup') => queue.add('push', { v }, { deduplication: { id: key, ttl: TTL } })

  /** A key held with a TTL by a job whose duplicates this process now answers from Redis. */
  async function cachedKey(label: string): Promise<{ key: string; owner: Job<Payload> }> {
    const key = `${label}:${++seq}`
    const owner = await add(key, 'owner')
    const hits = queue.cacheOutcomes.get('hit')
    await waitFor(
      async () => (await add(key)).id === owner.id && queue.cacheOutcomes.get('hit') > hits,
      5_000,
      'a duplicate answered from Redis',
    )
    return { key, owner }
  }

  /**
   * Adds the key again and again right after its fact ended: answers naming the old owner (stale) may come only
   * before the first answer that names a new job, and for at most `windowMs`; every answer after names the new job.
   */
  async function answersAfterEnd(key: string, oldId: string, windowMs: number): Promise<{ stale: number; ms: number }> {
    const started = performance.now()
    let stale = 0
    let fresh: Job<Payload>
    for (;;) {
      fresh = await add(key, 'after')
      if (fresh.id !== oldId) break
      stale++
      expect(performance.now() - started).toBeLessThan(windowMs)
    }
    const ms = performance.now() - started
    expect(fresh.outcome).toBe('added')
    for (let i = 0; i < 20; i++) expect((await add(key)).id).toBe(fresh.id)
    return { stale, ms }
  }

  it('removeDeduplicationKey by a Queue with redis in another process: the very next add is added', async () => {
    for (let round = 0; round < 5; round++) {
      const { key, owner } = await cachedKey('child-remove')
      expect(await withRedis.send({ op: 'remove', key })).toBe(true)
      expect((await answersAfterEnd(key, owner.id, WINDOW_MS)).stale).toBe(0)
    }
  })

  it('replace by a Queue with redis in another process: the very next duplicate names the new owner', async () => {
    const { key, owner } = await cachedKey('child-replace')
    const replaced = (await withRedis.send({ op: 'add', key, ttl: TTL, replace: true, v: 'new' })) as {
      id: string
      outcome: string
    }
    expect(replaced.outcome).toBe('replaced')
    const next = await add(key)
    expect(next.id).toBe(replaced.id)
    expect(next.id).not.toBe(owner.id)
    expect(next.data).toEqual({ v: 'new' })
  })

  it('removeJob of the owner by a Queue with redis in another process: the very next add is added', async () => {
    const { key, owner } = await cachedKey('child-remove-job')
    expect(await withRedis.send({ op: 'removeJob', id: owner.id })).toBe(true)
    expect((await answersAfterEnd(key, owner.id, WINDOW_MS)).stale).toBe(0)
  })

  it('job.removeDeduplicationKey() and queue.removeJob() of this process: the very next add is added', async () => {
    const a = await cachedKey('own-job-remove')
    expect(await a.owner.removeDeduplicationKey()).toBe(true)
    expect((await answersAfterEnd(a.key, a.owner.id, WINDOW_MS)).stale).toBe(0)
    const b = await cachedKey('own-remove-job')
    expect(await queue.removeJob(b.owner.id)).toBe(true)
    expect((await answersAfterEnd(b.key, b.owner.id, WINDOW_MS)).stale).toBe(0)
  })

  it('an extend that shortens the TTL: the cached entry does not outlive the new expiry', async () => {
    const { key, owner } = await cachedKey('shorten')
    const extended = await queue.add('push', { v: 'x' }, { deduplication: { id: key, ttl: 300, extend: true } })
    expect(extended.outcome).toBe('extended')
    expect((await add(key)).id).toBe(owner.id)
    // Past the new expiry by the database clock, with 100 ms for the Redis entry's own TTL to run out too.
    await waitFor(
      async () =>
        (
          await db.pool.query(
            `select expires_at + interval '100 milliseconds' <= now() as expired
      from "${db.schema}".dedup_keys where queue = $1 and key = $2`,
            [QUEUE, key],
          )
        ).rows[0]?.expired === true,
      5_000,
      'the shortened key to expire',
    )
    expect((await answersAfterEnd(key, owner.id, WINDOW_MS)).stale).toBe(0)
  })

  it('a process without redis removes the key: the very next add is added', async () => {
    for (let round = 0; round < 5; round++) {
      const { key, owner } = await cachedKey('child-plain-remove')
      expect(await withoutRedis.send({ op: 'remove', key })).toBe(true)
      expect((await answersAfterEnd(key, owner.id, WINDOW_MS)).stale).toBe(0)
    }
  })

  it('SQL by hand (delete, expiry brought forward, the owner deleted, TRUNCATE): stale answers only until the NOTIFY arrives', async () => {
    const sql = (text: string, values: unknown[]) => db.pool.query(text.replaceAll('$S', `"${db.schema}"`), values)
    const deleted = await cachedKey('sql-delete')
    await sql('delete from $S.dedup_keys where queue = $1 and key = $2', [QUEUE, deleted.key])
    await answersAfterEnd(deleted.key, deleted.owner.id, WINDOW_MS)

    const expired = await cachedKey('sql-expire')
    await sql(`update $S.dedup_keys set expires_at = now() - interval '1 ms' where queue = $1 and key = $2`, [
      QUEUE,
      expired.key,
    ])
    await answersAfterEnd(expired.key, expired.owner.id, WINDOW_MS)

    const orphaned = await cachedKey('sql-owner-deleted')
    await sql('delete from $S.jobs where id = $1', [orphaned.owner.id])
    await answersAfterEnd(orphaned.key, orphaned.owner.id, WINDOW_MS)

    const truncated = await cachedKey('sql-truncate')
    await sql('truncate $S.jobs cascade', [])
    await answersAfterEnd(truncated.key, truncated.owner.id, WINDOW_MS)
  })

  it("a removal inside a caller's transaction counts from its commit", async () => {
    const { key, owner } = await cachedKey('tx-remove')
    const client = await db.pool.connect()
    try {
      await client.query('begin')
      expect(await queue.removeDeduplicationKey(key, { tx: client })).toBe(true)
      // Not committed yet: Postgres still holds the key, and so may Redis.
      expect((await add(key)).id).toBe(owner.id)
      await client.query('commit')
    } finally {
      client.release()
    }
    await answersAfterEnd(key, owner.id, WINDOW_MS)
  })

  it('a fact ended while the listener is down is never answered: the process asks Postgres until it has read the epochs again', async () => {
    const { key, owner } = await cachedKey('listener-down')
    const unsynced = queue.cacheOutcomes.get('unsynced')
    await db.pool.query('select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1', [
      `pgonce-cache ${db.schema} ${process.pid}`,
    ])
    // Once it knows its listener is gone, the process stops asking Redis; the NOTIFY of this delete never reaches it.
    await waitFor(
      async () => (await add(key)).id === owner.id && queue.cacheOutcomes.get('unsynced') > unsynced,
      5_000,
      'the listener to be seen down',
    )
    await db.pool.query(`delete from "${db.schema}".dedup_keys where queue = $1 and key = $2`, [QUEUE, key])
    const after = await add(key, 'after')
    expect(after.outcome).toBe('added')
    // Back, synced (a hit again), and never the old owner.
    const hits = queue.cacheOutcomes.get('hit')
    await waitFor(
      async () => (await add(key)).id === after.id && queue.cacheOutcomes.get('hit') > hits,
      5_000,
      'hits after the reconnect',
    )
  })

  it('a restore from backup (a key gone without triggers, epochs gone back): a fresh process and this one stop answering it', async () => {
    const { key, owner } = await cachedKey('restore')
    const client = await db.pool.connect()
    try {
      // What a restore of an older dump does: rows replaced without firing triggers, cache_epochs back to older values.
      await client.query('begin')
      await client.query("set local session_replication_role = 'replica'")
      await client.query(`delete from "${db.schema}".dedup_keys where queue = $1 and key = $2`, [QUEUE, key])
      await client.query(`update "${db.schema}".cache_epochs set epoch = epoch - 1000000`)
      await client.query('commit')
    } finally {
      client.release()
    }
    const fresh = new Queue<Payload>(QUEUE, {
      connectionString: db.url,
      schema: db.schema,
      redis: REDIS_URL,
      migrate: false,
    })
    try {
      // The fresh process's listener finds Redis's epochs ahead of Postgres's and bumps every bucket above them before
      // it answers anything from Redis (its first hit says it is synced).
      await waitFor(
        async () => {
          await fresh.add('probe', { v: 'p' }, { deduplication: { id: `probe:${key}`, ttl: TTL } })
          return fresh.cacheOutcomes.get('hit') > 0
        },
        5_000,
        'the fresh queue to answer from Redis',
      )
      const first = await fresh.add('push', { v: 'fresh' }, { deduplication: { id: key, ttl: TTL } })
      expect(first.outcome).toBe('added')
      expect(first.id).not.toBe(owner.id)
      await waitFor(
        async () => (await add(key)).id === first.id,
        WINDOW_MS,
        'this process to answer with the new owner',
      )
    } finally {
      await fresh.close()
    }
  })
})
