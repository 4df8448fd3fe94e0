// The decision table of docs/deduplication.md with the Redis layer on: every cell, every strategy, run twice side by side (a Queue without redis, one with it) and answered alike, with Redis flushed between adds or not.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeduplicationError, type Job, Queue } from '../src/index.js'
import {
  deleteSchemaKeys,
  REDIS_URL,
  redisAvailable,
  schemaKeys,
  testClient,
  untilEpochSeen,
} from './helpers/redis-support.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'

type Payload = { v: string }
type Strategy = 'plain' | 'extend' | 'replace'
type OwnerCase =
  | 'absent'
  | 'expired'
  | 'no-ttl-finished'
  | 'waiting'
  | 'delayed'
  | 'waiting-children'
  | 'active'
  | 'completed'
  | 'failed'
  | 'with-dependent'

const TTL = 3_600_000
const OWNER_CASES: OwnerCase[] = [
  'absent',
  'expired',
  'no-ttl-finished',
  'waiting',
  'delayed',
  'waiting-children',
  'active',
  'completed',
  'failed',
  'with-dependent',
]
const STRATEGIES: Strategy[] = ['plain', 'extend', 'replace']

const ok = await redisAvailable('redis.dedup-table.test.ts')

/** One side of the twin: a Queue, and the job ids it has seen, numbered in order of appearance. */
class Side {
  private labels = new Map<string, string>()
  constructor(
    readonly queue: Queue<Payload>,
    readonly db: TestSchema,
  ) {}

  /** Starts numbering again (each cell on each side from #1). */
  reset(): void {
    this.labels = new Map()
  }

  label(id: string | null): string | null {
    if (id === null) return null
    if (!this.labels.has(id)) this.labels.set(id, `#${this.labels.size + 1}`)
    return this.labels.get(id) as string
  }

  /** An add, as the caller sees it: what was decided and which job (by label) with which data answered. */
  async add(
    v: string,
    key: string,
    opts: { ttl?: number; extend?: boolean; replace?: boolean; delay?: number; dependsOn?: string[] },
  ) {
    const { ttl, extend, replace, ...rest } = opts
    try {
      const job = await this.queue.add(
        'push',
        { v },
        {
          deduplication: {
            id: key,
            ...(ttl === undefined ? {} : { ttl }),
            ...(extend ? { extend } : {}),
            ...(replace ? { replace } : {}),
          },
          ...rest,
        },
      )
      return {
        outcome: job.outcome,
        deduplicated: job.deduplicated,
        job: this.label(job.id),
        data: job.data,
        name: job.name,
        ownQueue: job.queue === this.queue.name,
      }
    } catch (err) {
      if (!(err instanceof DeduplicationError)) throw err
      return { error: err.code, owner: this.label(err.ownerId) }
    }
  }

  async sql(text: string, values: unknown[] = []): Promise<Record<string, unknown>[]> {
    return (await this.db.pool.query(text.replaceAll('$S', `"${this.db.schema}"`), values)).rows
  }

  /** The key's jobs and row, with ids as labels: what the twin must agree on at the end. */
  async tables(key: string) {
    const jobs = await this.sql(
      'select id::text, state, data, dedup_key from $S.jobs where queue = $1 and dedup_key = $2 order by id',
      [this.queue.name, key],
    )
    const keys = await this.sql(
      `select key, job_id::text, expires_at is not null as ttl from $S.dedup_keys where queue = $1 and key = $2`,
      [this.queue.name, key],
    )
    return {
      jobs: jobs.map((j) => ({ job: this.label(j.id as string), state: j.state, data: j.data, key: j.dedup_key })),
      keys: keys.map((k) => ({ key: k.key, owner: this.label(k.job_id as string), ttl: k.ttl })),
    }
  }
}

describe.skipIf(!ok)('the decision table (docs/deduplication.md) with the Redis layer on', () => {
  let db: TestSchema
  let plain: Side
  let cached: Side
  let redis: ReturnType<typeof testClient>

  beforeAll(async () => {
    db = await freshSchema('redis_table')
    redis = testClient(REDIS_URL as string)
    plain = new Side(new Queue<Payload>('twin-plain', { connectionString: db.url, schema: db.schema }), db)
    cached = new Side(
      new Queue<Payload>('twin-cached', { connectionString: db.url, schema: db.schema, redis: REDIS_URL }),
      db,
    )
    // Wait for the listener to be synced: a duplicate answered from Redis.
    await cached.queue.add('warm', { v: 'w' }, { deduplication: { id: 'warm', ttl: TTL } })
    await waitFor(
      async () => {
        await cached.queue.add('warm', { v: 'w' }, { deduplication: { id: 'warm', ttl: TTL } })
        return cached.queue.cacheOutcomes.get('hit') > 0
      },
      5_000,
      'a duplicate answered from Redis',
    )
  })
  afterAll(async () => {
    await plain?.queue.close()
    await cached?.queue.close()
    if (redis !== undefined) {
      await deleteSchemaKeys(redis, db.schema)
      redis.disconnect()
    }
    await db?.drop()
  })

  /** Brings the key's first owner (`first`, added with a TTL unless the case says not) into the case's state. */
  async function arrange(side: Side, key: string, owner: OwnerCase, first: Job<Payload> | null): Promise<void> {
    if (first === null) return
    const id = first.id
    switch (owner) {
      case 'expired':
        await side.sql(
          `update $S.dedup_keys set expires_at = now() - interval '1 second' where queue = $1 and key = $2`,
          [side.queue.name, key],
        )
        break
      case 'no-ttl-finished':
      case 'completed':
      case 'failed':
        await side.sql(`update $S.jobs set state = $2, finished_at = now() where id = $1`, [
          id,
          owner === 'failed' ? 'failed' : 'completed',
        ])
        break
      case 'active':
        await side.sql(
          `update $S.jobs set state = 'active', lock_token = gen_random_uuid(), locked_until = now() + interval '5 minutes',
          attempts = attempts + 1, started_at = now() where id = $1`,
          [id],
        )
        break
      case 'with-dependent':
        await side.queue.add('child', { v: 'child' }, { dependsOn: [id] })
        break
      default:
        break
    }
    if (owner === 'expired') await untilEpochSeen(redis, db.pool, db.schema, `k ${side.queue.name} ${key}`)
  }

  async function firstOwner(side: Side, key: string, owner: OwnerCase): Promise<Job<Payload> | null> {
    if (owner === 'absent') return null
    const parent = owner === 'waiting-children' ? await side.queue.add('parent', { v: 'parent' }) : null
    return side.queue.add(
      'push',
      { v: 'first' },
      {
        deduplication: owner === 'no-ttl-finished' ? { id: key } : { id: key, ttl: TTL },
        ...(owner === 'delayed' ? { delay: 600_000 } : {}),
        ...(parent === null ? {} : { dependsOn: [parent.id] }),
      },
    )
  }

  /** The whole story of one cell on one side: its answers in order, then its tables. */
  async function play(side: Side, owner: OwnerCase, strategy: Strategy, flush: boolean) {
    const key = `${owner}:${strategy}:${flush ? 'flushed' : 'kept'}`
    const answers: unknown[] = []
    side.reset()
    const between = async () => {
      if (flush && side === cached) await deleteSchemaKeys(redis, db.schema)
    }
    const first = await firstOwner(side, key, owner)
    // Plain duplicates before the state change: these fill the cache.
    for (let i = 0; i < 2; i++) answers.push(await side.add(`dup-before-${i}`, key, { ttl: TTL }))
    await arrange(side, key, owner, first)
    await between()
    answers.push(
      await side.add('strategy', key, { ttl: TTL, extend: strategy === 'extend', replace: strategy === 'replace' }),
    )
    for (let i = 0; i < 3; i++) {
      await between()
      answers.push(await side.add(`dup-after-${i}`, key, { ttl: TTL }))
      answers.push(await side.add(`dup-after-no-ttl-${i}`, key, {}))
    }
    return { answers, tables: await side.tables(key) }
  }

  for (const owner of OWNER_CASES) {
    for (const strategy of STRATEGIES) {
      it(`${owner} / ${strategy}: the same answers and rows with Redis as without, flushed between adds or not`, async () => {
        const hits = cached.queue.cacheOutcomes.get('hit')
        for (const flush of [false, true]) {
          const want = await play(plain, owner, strategy, flush)
          const got = await play(cached, owner, strategy, flush)
          expect(got.answers).toEqual(want.answers)
          expect(got.tables).toEqual(want.tables)
        }
        // Where Postgres says a TTL key stays held by one owner, later duplicates came from Redis.
        if (owner !== 'absent' && owner !== 'expired' && owner !== 'no-ttl-finished' && strategy === 'plain') {
          expect(cached.queue.cacheOutcomes.get('hit')).toBeGreaterThan(hits)
        }
      })
    }
  }

  it('a plain duplicate answered from Redis has the shape Postgres gives, with state and attempts as of caching', async () => {
    const first = await cached.queue.add(
      'push',
      { v: 'shape' },
      { deduplication: { id: 'shape', ttl: TTL }, priority: 3, attempts: 4 },
    )
    const fromPg = await plain.queue.add(
      'push',
      { v: 'shape' },
      { deduplication: { id: 'shape', ttl: TTL }, priority: 3, attempts: 4 },
    )
    const hits = cached.queue.cacheOutcomes.get('hit')
    // Until a duplicate is answered from Redis (the entry is written in the background).
    const dup = await waitFor(
      async () => {
        const answer = await cached.queue.add('push', { v: 'other' }, { deduplication: { id: 'shape', ttl: TTL } })
        return cached.queue.cacheOutcomes.get('hit') > hits ? answer : undefined
      },
      5_000,
      'the duplicate answered from Redis',
    )
    const pgDup = await plain.queue.add('push', { v: 'other' }, { deduplication: { id: 'shape', ttl: TTL } })
    const shape = (j: Job<Payload>) =>
      Object.fromEntries(Object.entries(j).filter(([k]) => !['owner', 'id', 'queue', 'runAt', 'createdAt'].includes(k)))
    expect(shape(dup)).toEqual(shape(pgDup))
    expect(dup.id).toBe(first.id)
    expect(dup.data).toEqual({ v: 'shape' })
    expect(dup.runAt).toEqual(first.runAt)
    expect(dup.createdAt).toEqual(first.createdAt)
    expect(fromPg.deduplicated).toBe(false)
  })

  it('an entry overwritten by hand with something else is ignored: Postgres answers', async () => {
    const first = await cached.queue.add('push', { v: 'garbled' }, { deduplication: { id: 'garbled', ttl: TTL } })
    const hits = cached.queue.cacheOutcomes.get('hit')
    for (let i = 0; i < 100 && cached.queue.cacheOutcomes.get('hit') === hits; i++) {
      await cached.queue.add('push', { v: 'x' }, { deduplication: { id: 'garbled', ttl: TTL } })
    }
    const entries = (await schemaKeys(redis, db.schema)).filter((k) => k.includes(':k:twin-cached:'))
    for (const value of [`${Date.now() + TTL}|not json`, `${Date.now() + TTL}|[1,2]`, 'no bar at all']) {
      for (const k of entries) await redis.set(k, value, 'PX', 60_000)
      const dup = await cached.queue.add('push', { v: 'y' }, { deduplication: { id: 'garbled', ttl: TTL } })
      expect(dup.id).toBe(first.id)
      expect(dup.data).toEqual({ v: 'garbled' })
    }
  })

  it('an add rolled back, or made inside a transaction, leaves no entry; the add after the commit is cached', async () => {
    const client = await db.pool.connect()
    try {
      const keysBefore = (await schemaKeys(redis, db.schema)).filter((k) => k.includes(':k:twin-cached:')).length
      await client.query('begin')
      const inTx = await cached.queue.add(
        'push',
        { v: 'tx' },
        { deduplication: { id: 'tx-key', ttl: TTL }, tx: client },
      )
      expect(inTx.outcome).toBe('added')
      const again = await cached.queue.add(
        'push',
        { v: 'tx2' },
        { deduplication: { id: 'tx-key', ttl: TTL }, tx: client },
      )
      expect(again.id).toBe(inTx.id)
      await client.query('rollback')
      expect((await schemaKeys(redis, db.schema)).filter((k) => k.includes(':k:twin-cached:')).length).toBe(keysBefore)
      const after = await cached.queue.add('push', { v: 'after' }, { deduplication: { id: 'tx-key', ttl: TTL } })
      expect(after.outcome).toBe('added')
      expect(after.id).not.toBe(inTx.id)
    } finally {
      client.release()
    }
  })
})
