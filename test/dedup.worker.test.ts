// Dedup keys and real job runs: a no-TTL key is released when its own job finishes, never a newer generation's; a TTL key outlives its job.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Job, Queue, Worker, runMaintenance } from '../src/index.js'
import { waitFor } from './helpers/wait.js'
import { waitForState } from './helpers/jobs.js'
import { type DedupTables, closeDedupSuite, openDedupSuite } from './helpers/dedup-fixture.js'
import type { TestSchema } from './helpers/schema.js'

type Payload = { v: string; fail?: boolean }

const QUEUE = 'dedup-worker'
const TTL = 3_600_000

let db: TestSchema
let queue: Queue<Payload>
let t: DedupTables<Payload>
let seq = 0

beforeAll(async () => ({ db, queue, t } = await openDedupSuite<Payload>('dedup_worker', QUEUE)))
afterAll(() => closeDedupSuite({ db, queue }))

const newKey = (label: string) => `${label}:${++seq}`

/** Handlers that wait until the test opens their gate (by `data.v`); jobs without a gate run straight through. */
class Gates {
  private readonly open = new Map<string, () => void>()
  private readonly waiting = new Map<string, Promise<void>>()
  hold(v: string): void {
    this.waiting.set(v, new Promise((resolve) => this.open.set(v, resolve)))
  }
  release(v: string): void {
    this.open.get(v)?.()
  }
  /** Lets every held handler finish (so that a failed test's worker can close at once). */
  releaseAll(): void {
    for (const open of this.open.values()) open()
  }
  pass(v: string): Promise<void> {
    return this.waiting.get(v) ?? Promise.resolve()
  }
}

/** Runs `body` with a Worker (concurrency 1) whose handler waits at its gate, then fails if `data.fail`. */
async function withWorker(gates: Gates, body: (worker: Worker<Payload>) => Promise<void>): Promise<void> {
  const worker = new Worker<Payload>(
    QUEUE,
    async (job: Job<Payload>) => {
      await gates.pass(job.data.v)
      if (job.data.fail) throw new Error(`failing ${job.data.v}`)
      return job.data.v
    },
    {
      connectionString: db.url,
      schema: db.schema,
      concurrency: 1,
      pollIntervalMs: 100,
      maintenanceIntervalMs: 0,
      migrate: false,
    },
  )
  try {
    await body(worker)
  } finally {
    gates.releaseAll()
    await worker.close()
  }
}

describe('a no-TTL key and its job run', () => {
  it('is released when the job completes: the next add creates a new job', async () => {
    const key = newKey('complete')
    const job = await queue.add('push', { v: 'a' }, { deduplication: { id: key } })
    await withWorker(new Gates(), async () => {
      await waitForState(db, job.id, 'completed', 30_000)
    })
    expect(await t.key(key)).toBeUndefined()
    expect(await queue.getDeduplicationJobId(key)).toBeNull()
    const next = await queue.add('push', { v: 'b' }, { deduplication: { id: key } })
    expect(next.outcome).toBe('added')
    expect(next.id).not.toBe(job.id)
  })

  it('is held while the job runs and between attempts, and released when it fails for good', async () => {
    const key = newKey('fail')
    const gates = new Gates()
    gates.hold('f')
    const job = await queue.add(
      'push',
      { v: 'f', fail: true },
      { deduplication: { id: key }, attempts: 2, backoff: 600_000 },
    )
    await withWorker(gates, async () => {
      await waitForState(db, job.id, 'active', 30_000)
      expect(await queue.getDeduplicationJobId(key)).toBe(job.id)
      gates.release('f')
      // First attempt failed: back to the queue for a retry in 10 minutes, still owning the key.
      await waitForState(db, job.id, 'delayed', 30_000)
      expect(await t.keyOwner(key)).toBe(job.id)
      const dup = await queue.add('push', { v: 'dup' }, { deduplication: { id: key } })
      expect(dup.id).toBe(job.id)
      // Make the retry due now; the last attempt fails too.
      await t.sql('update $S.jobs set run_at = now() where id = $1', [job.id])
      await waitForState(db, job.id, 'failed', 30_000)
    })
    expect(await t.key(key)).toBeUndefined()
    const next = await queue.add('push', { v: 'next' }, { deduplication: { id: key } })
    expect(next.outcome).toBe('added')
  })

  for (const ending of ['completes', 'fails for good'] as const) {
    it(`generation 1 that ${ending} after generation 2 took the key leaves the key with generation 2`, async () => {
      const key = newKey(`generations-${ending}`)
      const gates = new Gates()
      gates.hold('gen1')
      gates.hold('gen2')
      const gen1 = await queue.add(
        'push',
        { v: 'gen1', fail: ending === 'fails for good' },
        { deduplication: { id: key } },
      )
      await withWorker(gates, async () => {
        await waitForState(db, gen1.id, 'active', 30_000)
        const gen2 = await queue.add('push', { v: 'gen2' }, { deduplication: { id: key, replace: true } })
        expect(gen2.outcome).toBe('replaced')
        // One running, one queued (the worker's only slot is busy: it claims nothing more).
        const rows = await t.jobsWithKey(key)
        expect(rows.map((r) => r.id)).toEqual([gen1.id, gen2.id])
        expect(rows[0]?.state).toBe('active')
        expect(rows[1]?.state).toBe('waiting')
        expect(rows[1]?.data).toEqual({ v: 'gen2' })
        expect(await t.keyOwner(key)).toBe(gen2.id)

        gates.release('gen1')
        await waitForState(db, gen1.id, ending === 'completes' ? 'completed' : 'failed', 30_000)
        expect(await t.keyOwner(key)).toBe(gen2.id)
        expect(await queue.getDeduplicationJobId(key)).toBe(gen2.id)
        expect((await queue.add('push', { v: 'dup' }, { deduplication: { id: key } })).id).toBe(gen2.id)

        // Generation 2 runs next and, finishing, releases its own key.
        await waitForState(db, gen2.id, 'active', 30_000)
        gates.release('gen2')
        await waitForState(db, gen2.id, 'completed', 30_000)
        await waitFor(async () => (await t.key(key)) === undefined, 10_000, 'the key to be released')
      })
    })
  }
})

describe('a TTL key and its job run', () => {
  it('outlives its completed job until it expires', async () => {
    const key = newKey('ttl')
    const job = await queue.add('push', { v: 't' }, { deduplication: { id: key, ttl: TTL } })
    await withWorker(new Gates(), async () => {
      await waitForState(db, job.id, 'completed', 30_000)
    })
    expect(await t.keyOwner(key)).toBe(job.id)
    expect(await queue.getDeduplicationJobId(key)).toBe(job.id)
    const dup = await queue.add('push', { v: 'again' }, { deduplication: { id: key, ttl: TTL } })
    expect(dup.id).toBe(job.id)
    expect(dup.state).toBe('completed')
    expect(dup.outcome).toBe('duplicate-key')

    await t.expire(key)
    const next = await queue.add('push', { v: 'later' }, { deduplication: { id: key, ttl: TTL } })
    expect(next.outcome).toBe('added')
    expect(next.id).not.toBe(job.id)
  })
})

describe('housekeeping and keys', () => {
  const maintain = () => runMaintenance({ connectionString: db.url, schema: db.schema })

  it("a rescued job that has no attempt left releases its own no-TTL key, never a newer generation's", async () => {
    const own = newKey('rescue-own')
    const ownJob = await queue.add('push', { v: 'own' }, { deduplication: { id: own } })
    const moved = newKey('rescue-moved')
    const gen1 = await queue.add('push', { v: 'gen1' }, { deduplication: { id: moved } })
    for (const id of [ownJob.id, gen1.id]) await t.makeActive(id)
    const gen2 = await queue.add('push', { v: 'gen2' }, { deduplication: { id: moved, replace: true } })
    // Both leases ran out (a crashed worker) on a run that was already the one more run a stall gives: backdated on
    // the database clock.
    await t.sql(
      `update $S.jobs set locked_until = now() - interval '1 minute', stalls = 1 where id = any($1::bigint[])`,
      [[ownJob.id, gen1.id]],
    )

    await waitFor(async () => (await maintain()).ran, 30_000, 'a maintenance run')

    expect((await waitForState(db, ownJob.id, 'failed', 1_000)).last_error).toContain('lease expired')
    await waitForState(db, gen1.id, 'failed', 1_000)
    expect(await t.key(own)).toBeUndefined()
    expect(await t.keyOwner(moved)).toBe(gen2.id)
  })

  it('runMaintenance deletes expired keys and leaves held ones', async () => {
    const expired = [newKey('sweep'), newKey('sweep')]
    for (const key of expired) {
      await queue.add('push', { v: key }, { deduplication: { id: key, ttl: TTL } })
      await t.expire(key)
    }
    const held = newKey('sweep-held')
    const owner = await queue.add('push', { v: held }, { deduplication: { id: held, ttl: TTL } })
    const result = await waitFor(
      async () => {
        const r = await maintain()
        return r.ran ? r : undefined
      },
      30_000,
      'a maintenance run',
    )
    expect(result.expiredKeys).toBe(2)
    for (const key of expired) expect(await t.key(key)).toBeUndefined()
    expect(await t.keyOwner(held)).toBe(owner.id)
  })
})

describe('job.removeDeduplicationKey({ tx }) inside a handler', () => {
  it("runs in the handler's transaction: rolled back with it, committed with it", async () => {
    const kept = newKey('tx-rollback')
    const gone = newKey('tx-commit')
    const own = new Queue<Payload>('dedup-worker-tx', { connectionString: db.url, schema: db.schema, migrate: false })
    const a = await own.add(
      'push',
      { v: 'rollback', fail: true },
      { deduplication: { id: kept, ttl: TTL }, attempts: 1 },
    )
    const b = await own.add('push', { v: 'commit' }, { deduplication: { id: gone, ttl: TTL } })
    const removed: boolean[] = []
    const worker = new Worker<Payload>(
      'dedup-worker-tx',
      async (job, ctx) => {
        await ctx.transaction(async (tx) => {
          removed.push(await job.removeDeduplicationKey({ tx }))
          // Inside the transaction the key is gone; outside it is still held until commit.
          expect(await own.getDeduplicationJobId(job.deduplicationId!)).toBe(job.id)
          if (job.data.fail) throw new Error('roll back')
        })
      },
      {
        connectionString: db.url,
        schema: db.schema,
        concurrency: 1,
        pollIntervalMs: 100,
        maintenanceIntervalMs: 0,
        migrate: false,
      },
    )
    try {
      await waitForState(db, a.id, 'failed', 30_000)
      await waitForState(db, b.id, 'completed', 30_000)
    } finally {
      await worker.close()
    }
    expect(removed).toEqual([true, true])
    expect(await own.getDeduplicationJobId(kept)).toBe(a.id)
    expect(await own.getDeduplicationJobId(gone)).toBeNull()
    await own.close()
  })
})
