// Without redis, a call that ends a cached fact answers only once every cache has heard it: it waits the settle interval (100 ms) after its commit while a cache listener's lease lasts, and not otherwise; the calls that end no cached fact (cancel, retry, housekeeping, retention) move no epoch.

import { performance } from 'node:perf_hooks'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { Effects, Queue, Worker, runMaintenance } from '../src/index.js'
import { waitForState } from './helpers/jobs.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

const QUEUE = 'settle'
const TTL = 3_600_000
/** migration 000020's settle interval. */
const SETTLE_MS = 100

let db: TestSchema
let queue: Queue<{ v: string }>
let effects: Effects
let seq = 0

beforeAll(async () => {
  db = await freshSchema('redis_settle')
  queue = new Queue(QUEUE, { connectionString: db.url, schema: db.schema, migrate: false })
  effects = new Effects({ connectionString: db.url, schema: db.schema, migrate: false })
})
afterAll(async () => {
  await effects?.close()
  await queue?.close()
  await db?.drop()
})

const sql = (text: string, values: unknown[] = []) => db.pool.query(text.replaceAll('$S', `"${db.schema}"`), values)
/** A cache listener's lease, as a process with redis writes it (src/cache/listener-lease.ts). */
const lease = (ms: number) =>
  sql("insert into $S.cache_listeners values ('test', now() + make_interval(secs => $1::float8 / 1000))", [ms])
const key = (label: string) => `${label}:${++seq}`
/** An owner holding key `k` (with no TTL when `ttl` is null). */
const held = (k: string, ttl: number | null = TTL) =>
  queue.add('n', { v: 'owner' }, { deduplication: { id: k, ...(ttl === null ? {} : { ttl }) } })

async function ms(call: () => Promise<unknown>): Promise<number> {
  const started = performance.now()
  await call()
  return performance.now() - started
}

/** The shortest of three runs of `call` (each on fresh state from `prepare`): a call that never waits is short at least once, on any load. */
async function shortest<T>(prepare: () => Promise<T>, call: (state: T) => Promise<unknown>): Promise<number> {
  const times: number[] = []
  for (let i = 0; i < 3; i++) {
    const state = await prepare()
    times.push(await ms(() => call(state)))
  }
  return Math.min(...times)
}

const epochs = async () =>
  (await sql('select array_agg(epoch order by bucket)::text as e from $S.cache_epochs')).rows[0].e as string

describe('a lease lasts: calls that end a cached fact wait', () => {
  beforeEach(async () => {
    await sql('delete from $S.cache_listeners')
    await lease(60_000)
  })

  it('removeDeduplicationKey of a key held with a TTL waits; of a key without TTL, or none, it does not', async () => {
    const k = key('remove')
    await held(k)
    expect(await ms(() => queue.removeDeduplicationKey(k))).toBeGreaterThanOrEqual(SETTLE_MS)
    expect(
      await shortest(
        async () => {
          const k2 = key('remove-no-ttl')
          await held(k2, null)
          return k2
        },
        (k2) => queue.removeDeduplicationKey(k2),
      ),
    ).toBeLessThan(SETTLE_MS)
  })

  it("job.removeDeduplicationKey() waits like the queue's", async () => {
    const owner = await held(key('job-remove'))
    expect(await ms(async () => expect(await owner.removeDeduplicationKey()).toBe(true))).toBeGreaterThanOrEqual(
      SETTLE_MS,
    )
  })

  it('a replace of a key held with a TTL and an extend that shortens it wait; an extend that lengthens it does not', async () => {
    const replaced = key('replace')
    await held(replaced)
    expect(
      await ms(async () =>
        expect(
          (await queue.add('n', { v: 'new' }, { deduplication: { id: replaced, ttl: TTL, replace: true } })).outcome,
        ).toBe('replaced'),
      ),
    ).toBeGreaterThanOrEqual(SETTLE_MS)
    const shortened = key('shorten')
    await held(shortened)
    expect(
      await ms(() => queue.add('n', { v: 'x' }, { deduplication: { id: shortened, ttl: 1_000, extend: true } })),
    ).toBeGreaterThanOrEqual(SETTLE_MS)
    expect(
      await shortest(
        async () => {
          const k = key('lengthen')
          await held(k)
          return k
        },
        (k) => queue.add('n', { v: 'x' }, { deduplication: { id: k, ttl: TTL * 2, extend: true } }),
      ),
    ).toBeLessThan(SETTLE_MS)
  })

  it('addBulk with a replace waits', async () => {
    const k = key('bulk-replace')
    await held(k)
    expect(
      await ms(() =>
        queue.addBulk([{ name: 'n', data: { v: 'new' }, opts: { deduplication: { id: k, ttl: TTL, replace: true } } }]),
      ),
    ).toBeGreaterThanOrEqual(SETTLE_MS)
  })

  it('removeJob of the owner of a key held with a TTL waits; of a job without a key, it does not', async () => {
    const owner = await held(key('remove-job'))
    expect(await ms(() => queue.removeJob(owner.id))).toBeGreaterThanOrEqual(SETTLE_MS)
    expect(
      await shortest(
        () => queue.add('n', { v: 'plain' }),
        (job) => queue.removeJob(job.id),
      ),
    ).toBeLessThan(SETTLE_MS)
  })

  it('setLedgerRetention waits (every cached ledger fact may end); clearing it does not', async () => {
    expect(await ms(() => effects.setLedgerRetention(86_400_000))).toBeGreaterThanOrEqual(SETTLE_MS)
    expect(
      await shortest(
        async () => undefined,
        () => effects.setLedgerRetention(null),
      ),
    ).toBeLessThan(SETTLE_MS)
  })

  it("inside a caller's transaction nothing waits (the window runs from the caller's commit: docs/redis.md)", async () => {
    expect(
      await shortest(
        async () => {
          const k = key('tx-remove')
          await held(k)
          return k
        },
        async (k) => {
          const client = await db.pool.connect()
          try {
            await client.query('begin')
            expect(await queue.removeDeduplicationKey(k, { tx: client })).toBe(true)
            await client.query('commit')
          } finally {
            client.release()
          }
        },
      ),
    ).toBeLessThan(SETTLE_MS)
  })
})

describe('no lease lasts: nothing waits', () => {
  it('an ended lease, or none, lets a removal of a key held with a TTL return at once', async () => {
    await sql('delete from $S.cache_listeners')
    await lease(-1_000)
    expect(
      await shortest(
        async () => {
          const k = key('no-lease')
          await held(k)
          return k
        },
        (k) => queue.removeDeduplicationKey(k),
      ),
    ).toBeLessThan(SETTLE_MS)
  })

  it('SQL: wait_for_caches() waits only while a lease lasts; remove_dedup_key() only for a key held with a TTL', async () => {
    await sql('delete from $S.cache_listeners')
    expect((await sql('select $S.wait_for_caches() as w')).rows[0].w).toBe(0)
    await lease(60_000)
    expect(
      await ms(async () => expect((await sql('select $S.wait_for_caches() as w')).rows[0].w).toBe(SETTLE_MS)),
    ).toBeGreaterThanOrEqual(SETTLE_MS)
    const k = key('call')
    await held(k)
    expect(
      await ms(async () =>
        expect((await sql('call $S.remove_dedup_key($1, $2)', [QUEUE, k])).rows[0]).toEqual({ removed: true }),
      ),
    ).toBeGreaterThanOrEqual(SETTLE_MS)
    expect((await sql('call $S.remove_dedup_key($1, $2)', [QUEUE, k])).rows[0]).toEqual({ removed: false })
  })
})

describe('calls that end no cached fact move no epoch', () => {
  it('cancelJob (a no-TTL key released, a TTL key kept), retryJob (a key still held, a key expired), setRetention, a housekeeping round', async () => {
    const retried = new Queue<{ v: string }>(`${QUEUE}-retry`, {
      connectionString: db.url,
      schema: db.schema,
      migrate: false,
    })
    const worker = new Worker<{ v: string }>(
      `${QUEUE}-retry`,
      async () => {
        throw new Error('fails')
      },
      {
        connectionString: db.url,
        schema: db.schema,
        concurrency: 2,
        pollIntervalMs: 50,
        maintenanceIntervalMs: 0,
        migrate: false,
      },
    )
    try {
      const stillHeld = await retried.add('f', { v: 'f' }, { deduplication: { id: key('retry'), ttl: TTL } })
      const expired = await retried.add('f', { v: 'f' }, { deduplication: { id: key('retry-expired'), ttl: 1 } })
      await waitForState(db, stillHeld.id, 'failed')
      await waitForState(db, expired.id, 'failed')
      await worker.close()
      const noTtl = await held(key('cancel-no-ttl'), null)
      const withTtl = await held(key('cancel-ttl'))

      const before = await epochs()
      expect(await queue.cancelJob(noTtl.id)).toBe('cancelled')
      expect(await queue.cancelJob(withTtl.id)).toBe('cancelled')
      expect((await retried.retryJob(stillHeld.id)).state).toBe('waiting')
      expect((await retried.retryJob(expired.id)).state).toBe('waiting')
      await queue.setRetention({ completedMs: 0, failedMs: 0 })
      expect(await epochs()).toBe(before)

      // Past their retention, and the cancelled owner's key expired (by hand: that ends its fact, and moves an epoch).
      await sql(
        "update $S.jobs set finished_at = now() - interval '1 hour' where state in ('completed', 'cancelled', 'failed')",
      )
      await sql("update $S.dedup_keys set expires_at = now() - interval '1 ms' where job_id = $1", [withTtl.id])
      const expiredAndPrunable = await epochs()
      const round = await runMaintenance({ connectionString: db.url, schema: db.schema })
      expect(round.expiredKeys).toBeGreaterThan(0)
      expect(round.pruned).toBeGreaterThan(0)
      expect(await epochs()).toBe(expiredAndPrunable)
    } finally {
      await worker.close()
      await retried.close()
    }
  })
})
