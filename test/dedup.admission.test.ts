// Every cell of the decision table (docs/deduplication.md), for plain, extend and replace adds, checked in the database.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeduplicationError, type Job, Queue } from '../src/index.js'
import { type DedupTables, closeDedupSuite, openDedupSuite } from './helpers/dedup-fixture.js'
import type { TestSchema } from './helpers/schema.js'

type Payload = { v: string }
type Strategy = 'plain' | 'extend' | 'replace' | 'replace+extend'
type Pending = 'waiting' | 'delayed' | 'waiting-children'

const QUEUE = 'dedup-admission'
const TTL = 3_600_000

let db: TestSchema
let queue: Queue<Payload>
let t: DedupTables<Payload>
let seq = 0

beforeAll(async () => ({ db, queue, t } = await openDedupSuite<Payload>('dedup_admission', QUEUE)))
afterAll(() => closeDedupSuite({ db, queue }))

const newKey = (label: string) => `${label}:${++seq}`

function dedupOf(strategy: Strategy, id: string, ttl: number | undefined = TTL) {
  return {
    id,
    ...(ttl === undefined ? {} : { ttl }),
    ...(strategy === 'extend' || strategy === 'replace+extend' ? { extend: true } : {}),
    ...(strategy === 'replace' || strategy === 'replace+extend' ? { replace: true } : {}),
  }
}

/** The key points at `ownerId` and expires ≈ now() + TTL (allowing for a loaded machine). */
async function expectFreshKey(key: string, ownerId: string): Promise<void> {
  expect(await t.keyOwner(key)).toBe(ownerId)
  const left = await t.msLeft(key)
  expect(left).toBeGreaterThan(TTL - 60_000)
  expect(left).toBeLessThanOrEqual(TTL)
}

async function jobRow(id: string) {
  const [row] = await t.sql<{ id: string; state: string; data: Payload; lock_token: string | null; run_at: Date }>(
    'select id, state, data, lock_token, run_at from $S.jobs where id = $1',
    [id],
  )
  return row
}

/** Leaves the key held for 5 more seconds, so that a reset to now()+TTL is visible. */
const shortenTo5s = (key: string) =>
  t.sql(`update $S.dedup_keys set expires_at = now() + interval '5 seconds' where queue = $1 and key = $2`, [
    QUEUE,
    key,
  ])

const allJobs = () => t.sql('select * from $S.jobs order by id')

/** Adds the first owner of a key in the given pending state. */
async function addPendingOwner(key: string, state: Pending, ttl: number | undefined = TTL): Promise<Job<Payload>> {
  const deduplication = ttl === undefined ? { id: key } : { id: key, ttl }
  if (state === 'delayed') return queue.add('owner', { v: 'first' }, { deduplication, delay: 600_000 })
  if (state === 'waiting-children') {
    const parent = await queue.add('parent', { v: 'parent' })
    return queue.add('owner', { v: 'first' }, { deduplication, dependsOn: [parent.id] })
  }
  return queue.add('owner', { v: 'first' }, { deduplication })
}

async function rejection(p: Promise<unknown>): Promise<DeduplicationError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(DeduplicationError)
  return err as DeduplicationError
}

describe('key not held: insert a job and take the key', () => {
  const strategies: Strategy[] = ['plain', 'extend', 'replace']
  const situations = {
    absent: async (_key: string) => null,
    expired: async (key: string) => {
      const first = await queue.add('old', { v: 'old' }, { deduplication: { id: key, ttl: TTL } })
      await t.expire(key)
      return first
    },
    'no-TTL owner terminal': async (key: string) => {
      const first = await queue.add('old', { v: 'old' }, { deduplication: { id: key } })
      await t.makeTerminal(first.id, 'completed')
      return first
    },
    'orphan (owner row deleted, TTL still open)': async (key: string) => {
      const first = await queue.add('old', { v: 'old' }, { deduplication: { id: key, ttl: TTL } })
      await t.deleteJob(first.id)
      return first
    },
  }
  for (const [situation, prepare] of Object.entries(situations)) {
    for (const strategy of strategies) {
      it(`${situation}, ${strategy}`, async () => {
        const key = newKey('not-held')
        const previous = await prepare(key)
        const before = previous === null ? undefined : await jobRow(previous.id)
        expect(await queue.getDeduplicationJobId(key)).toBeNull()

        const job = await queue.add('new', { v: 'new' }, { deduplication: dedupOf(strategy, key) })

        expect(job.outcome).toBe('added')
        expect(job.deduplicated).toBe(false)
        expect(job.id).not.toBe(previous?.id)
        expect(job.data).toEqual({ v: 'new' })
        expect(job.state).toBe('waiting')
        expect(job.deduplicationId).toBe(key)
        await expectFreshKey(key, job.id)
        expect(await queue.getDeduplicationJobId(key)).toBe(job.id)
        // The previous row, where there still is one, is left exactly as it was.
        if (previous !== null) expect(await jobRow(previous.id)).toEqual(before)
      })
    }
  }

  it('without a ttl the new key has no expiry and is held while its job is live', async () => {
    const key = newKey('no-ttl')
    const job = await queue.add('new', { v: 'new' }, { deduplication: { id: key } })
    expect(job.outcome).toBe('added')
    const k = await t.key(key)
    expect(k).toEqual({ job_id: job.id, expires_at: null })
    expect((await queue.add('again', { v: 'again' }, { deduplication: { id: key } })).id).toBe(job.id)
  })

  it('keys are per queue: the same key in another queue is a separate key', async () => {
    const key = newKey('per-queue')
    const other = new Queue<Payload>(`${QUEUE}-other`, { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      const a = await queue.add('a', { v: 'a' }, { deduplication: { id: key, ttl: TTL } })
      const b = await other.add('b', { v: 'b' }, { deduplication: { id: key, ttl: TTL } })
      expect(b.outcome).toBe('added')
      expect(b.id).not.toBe(a.id)
      expect((await t.key(key))?.job_id).toBe(a.id)
      expect((await t.key(key, `${QUEUE}-other`))?.job_id).toBe(b.id)
    } finally {
      await other.close()
    }
  })
})

describe('held, owner pending', () => {
  const pendingStates: Pending[] = ['waiting', 'delayed', 'waiting-children']

  for (const state of pendingStates) {
    it(`${state} owner, plain: returns the owner unchanged`, async () => {
      const key = newKey(`pending-plain-${state}`)
      const owner = await addPendingOwner(key, state)
      expect(owner.state).toBe(state)
      const keyBefore = await t.key(key)
      const rowBefore = await jobRow(owner.id)

      const dup = await queue.add('dup', { v: 'second' }, { deduplication: { id: key, ttl: TTL } })

      expect(dup.id).toBe(owner.id)
      expect(dup.data).toEqual({ v: 'first' })
      expect(dup.name).toBe('owner')
      expect(dup.state).toBe(state)
      expect(dup.outcome).toBe('duplicate-key')
      expect(dup.deduplicated).toBe(true)
      expect(await t.jobsWithKey(key)).toEqual([{ id: owner.id, state, data: { v: 'first' } }])
      expect((await t.key(key))?.expires_at).toEqual(keyBefore?.expires_at)
      expect(await jobRow(owner.id)).toEqual(rowBefore)
    })

    it(`${state} owner, extend: keeps the owner and resets expires_at to now()+ttl`, async () => {
      const key = newKey(`pending-extend-${state}`)
      const owner = await addPendingOwner(key, state)
      await shortenTo5s(key)
      const rowBefore = await jobRow(owner.id)

      const ext = await queue.add('ext', { v: 'second' }, { deduplication: { id: key, ttl: TTL, extend: true } })

      expect(ext.id).toBe(owner.id)
      expect(ext.data).toEqual({ v: 'first' })
      expect(ext.outcome).toBe('extended')
      expect(ext.deduplicated).toBe(true)
      await expectFreshKey(key, owner.id)
      expect(await t.jobsWithKey(key)).toHaveLength(1)
      expect(await jobRow(owner.id)).toEqual(rowBefore)
    })

    for (const strategy of ['replace', 'replace+extend'] as const) {
      it(`${state} owner, ${strategy}: the owner row goes, a new job with the latest data takes the key`, async () => {
        const key = newKey(`pending-${strategy}-${state}`)
        const owner = await addPendingOwner(key, state)
        await shortenTo5s(key)

        const next = await queue.add('next', { v: 'latest' }, { deduplication: dedupOf(strategy, key) })

        expect(next.outcome).toBe('replaced')
        expect(next.deduplicated).toBe(false)
        expect(next.id).not.toBe(owner.id)
        expect(next.data).toEqual({ v: 'latest' })
        expect(next.name).toBe('next')
        expect(next.state).toBe('waiting')
        expect(await jobRow(owner.id)).toBeUndefined()
        expect(await t.jobsWithKey(key)).toEqual([{ id: next.id, state: 'waiting', data: { v: 'latest' } }])
        await expectFreshKey(key, next.id)
        // A replaced waiting-children owner leaves no dependency edge behind.
        expect(await t.sql('select 1 from $S.job_dependencies where job_id = $1', [owner.id])).toEqual([])
      })
    }
  }

  it('no-TTL key, plain: the live owner answers', async () => {
    const key = newKey('pending-no-ttl')
    const owner = await addPendingOwner(key, 'waiting', undefined)
    const dup = await queue.add('dup', { v: 'second' }, { deduplication: { id: key } })
    expect(dup.id).toBe(owner.id)
    expect(dup.outcome).toBe('duplicate-key')
    expect(await t.jobsWithKey(key)).toHaveLength(1)
  })
})

describe('held, owner active', () => {
  it('plain: returns the running owner', async () => {
    const key = newKey('active-plain')
    const owner = await addPendingOwner(key, 'waiting')
    await t.makeActive(owner.id)
    const dup = await queue.add('dup', { v: 'second' }, { deduplication: { id: key, ttl: TTL } })
    expect(dup.id).toBe(owner.id)
    expect(dup.state).toBe('active')
    expect(dup.data).toEqual({ v: 'first' })
    expect(dup.outcome).toBe('duplicate-key')
    expect(dup.deduplicated).toBe(true)
    expect(await t.jobsWithKey(key)).toHaveLength(1)
  })

  it('plain, no-TTL key: the running owner still holds it', async () => {
    const key = newKey('active-no-ttl')
    const owner = await addPendingOwner(key, 'waiting', undefined)
    await t.makeActive(owner.id)
    const dup = await queue.add('dup', { v: 'second' }, { deduplication: { id: key } })
    expect(dup.id).toBe(owner.id)
    expect(dup.outcome).toBe('duplicate-key')
  })

  it('extend: rejected with EXTEND_NOT_PENDING, nothing changes', async () => {
    const key = newKey('active-extend')
    const owner = await addPendingOwner(key, 'waiting')
    const token = await t.makeActive(owner.id)
    const keyBefore = await t.key(key)
    const jobsBefore = await allJobs()

    const err = await rejection(
      queue.add('ext', { v: 'second' }, { deduplication: { id: key, ttl: TTL, extend: true } }),
    )

    expect(err.code).toBe('EXTEND_NOT_PENDING')
    expect(err.message).toContain('Duplicate unique_key (extended TTL)')
    expect(err.key).toBe(key)
    expect(err.ownerId).toBe(owner.id)
    expect(await t.key(key)).toEqual(keyBefore)
    expect(keyBefore?.job_id).toBe(owner.id)
    expect(await allJobs()).toEqual(jobsBefore)
    expect((await jobRow(owner.id))?.lock_token).toBe(token)
  })

  for (const strategy of ['replace', 'replace+extend'] as const) {
    it(`${strategy}: the owner keeps running under its lease, a new job is queued and takes the key`, async () => {
      const key = newKey(`active-${strategy}`)
      const owner = await addPendingOwner(key, 'waiting')
      const token = await t.makeActive(owner.id)

      const next = await queue.add('next', { v: 'latest' }, { deduplication: dedupOf(strategy, key) })

      expect(next.outcome).toBe('replaced')
      expect(next.deduplicated).toBe(false)
      expect(next.id).not.toBe(owner.id)
      expect(next.data).toEqual({ v: 'latest' })
      expect(await t.jobsWithKey(key)).toEqual([
        { id: owner.id, state: 'active', data: { v: 'first' } },
        { id: next.id, state: 'waiting', data: { v: 'latest' } },
      ])
      expect((await jobRow(owner.id))?.lock_token).toBe(token)
      expect((await t.key(key))?.job_id).toBe(next.id)
      expect(await queue.getDeduplicationJobId(key)).toBe(next.id)
    })
  }
})

describe('held, owner terminal (TTL window still open)', () => {
  for (const state of ['completed', 'failed'] as const) {
    it(`${state} owner, plain: returns the finished owner`, async () => {
      const key = newKey(`terminal-plain-${state}`)
      const owner = await addPendingOwner(key, 'waiting')
      await t.makeTerminal(owner.id, state)
      const dup = await queue.add('dup', { v: 'second' }, { deduplication: { id: key, ttl: TTL } })
      expect(dup.id).toBe(owner.id)
      expect(dup.state).toBe(state)
      expect(dup.data).toEqual({ v: 'first' })
      expect(dup.outcome).toBe('duplicate-key')
      expect(dup.deduplicated).toBe(true)
      expect(await t.jobsWithKey(key)).toHaveLength(1)
    })

    it(`${state} owner, extend: rejected with EXTEND_NOT_PENDING, nothing changes`, async () => {
      const key = newKey(`terminal-extend-${state}`)
      const owner = await addPendingOwner(key, 'waiting')
      await t.makeTerminal(owner.id, state)
      const keyBefore = await t.key(key)
      const err = await rejection(
        queue.add('ext', { v: 'second' }, { deduplication: { id: key, ttl: TTL, extend: true } }),
      )
      expect(err.code).toBe('EXTEND_NOT_PENDING')
      expect(err.message).toContain('Duplicate unique_key (extended TTL)')
      expect(err.ownerId).toBe(owner.id)
      expect(await t.key(key)).toEqual(keyBefore)
      expect(await t.jobsWithKey(key)).toEqual([{ id: owner.id, state, data: { v: 'first' } }])
    })

    it(`${state} owner, replace: a new job is queued and takes the key, the old row stays as history`, async () => {
      const key = newKey(`terminal-replace-${state}`)
      const owner = await addPendingOwner(key, 'waiting')
      await t.makeTerminal(owner.id, state)
      const next = await queue.add('next', { v: 'latest' }, { deduplication: { id: key, ttl: TTL, replace: true } })
      expect(next.outcome).toBe('replaced')
      expect(next.deduplicated).toBe(false)
      expect(await t.jobsWithKey(key)).toEqual([
        { id: owner.id, state, data: { v: 'first' } },
        { id: next.id, state: 'waiting', data: { v: 'latest' } },
      ])
      expect((await t.key(key))?.job_id).toBe(next.id)
    })
  }
})

describe('owner has a live dependent', () => {
  for (const strategy of ['replace', 'replace+extend'] as const) {
    it(`${strategy}: rejected with REPLACE_HAS_DEPENDENTS, nothing changes`, async () => {
      const key = newKey(`dependents-${strategy}`)
      const owner = await addPendingOwner(key, 'waiting')
      const child = await queue.add('child', { v: 'child' }, { dependsOn: [owner.id] })
      expect(child.state).toBe('waiting-children')
      const keyBefore = await t.key(key)
      const jobsBefore = await allJobs()
      const edgesBefore = await t.sql('select * from $S.job_dependencies order by job_id, depends_on')

      const err = await rejection(queue.add('next', { v: 'latest' }, { deduplication: dedupOf(strategy, key) }))

      expect(err.code).toBe('REPLACE_HAS_DEPENDENTS')
      expect(err.ownerId).toBe(owner.id)
      expect(err.key).toBe(key)
      expect(await t.key(key)).toEqual(keyBefore)
      expect(await allJobs()).toEqual(jobsBefore)
      expect(await t.sql('select * from $S.job_dependencies order by job_id, depends_on')).toEqual(edgesBefore)
    })
  }

  it('an active owner with a live dependent cannot be replaced either', async () => {
    const key = newKey('dependents-active')
    const owner = await addPendingOwner(key, 'waiting')
    await queue.add('child', { v: 'child' }, { dependsOn: [owner.id] })
    await t.makeActive(owner.id)
    const err = await rejection(
      queue.add('next', { v: 'latest' }, { deduplication: { id: key, ttl: TTL, replace: true } }),
    )
    expect(err.code).toBe('REPLACE_HAS_DEPENDENTS')
    expect(await t.jobsWithKey(key)).toEqual([{ id: owner.id, state: 'active', data: { v: 'first' } }])
  })

  it('a dependent that is no longer live does not block a replace', async () => {
    const key = newKey('dependents-done')
    const owner = await addPendingOwner(key, 'waiting')
    const child = await queue.add('child', { v: 'child' }, { dependsOn: [owner.id] })
    await t.makeTerminal(child.id, 'failed')
    const next = await queue.add('next', { v: 'latest' }, { deduplication: { id: key, ttl: TTL, replace: true } })
    expect(next.outcome).toBe('replaced')
    expect((await t.key(key))?.job_id).toBe(next.id)
  })

  it('plain and extend adds are unaffected by dependents', async () => {
    const key = newKey('dependents-plain')
    const owner = await addPendingOwner(key, 'waiting')
    await queue.add('child', { v: 'child' }, { dependsOn: [owner.id] })
    expect((await queue.add('dup', { v: 'x' }, { deduplication: { id: key, ttl: TTL } })).outcome).toBe('duplicate-key')
    const ext = await queue.add('ext', { v: 'x' }, { deduplication: { id: key, ttl: TTL, extend: true } })
    expect(ext.outcome).toBe('extended')
    expect(ext.id).toBe(owner.id)
  })
})

describe('jobId and deduplication together: the jobId rule first', () => {
  it('a live jobId answers even when the key is free, and the key is not taken', async () => {
    const customId = newKey('custom')
    const key = newKey('jobid-first')
    const first = await queue.add('first', { v: 'first' }, { jobId: customId })
    const again = await queue.add(
      'again',
      { v: 'again' },
      { jobId: customId, deduplication: { id: key, ttl: TTL, replace: true } },
    )
    expect(again.id).toBe(first.id)
    expect(again.outcome).toBe('duplicate-job-id')
    expect(again.deduplicated).toBe(true)
    expect(await t.key(key)).toBeUndefined()
  })

  it('a live jobId wins over replace on the key it owns: nothing is replaced', async () => {
    const customId = newKey('custom')
    const key = newKey('jobid-replace')
    const first = await queue.add('first', { v: 'first' }, { jobId: customId, deduplication: { id: key, ttl: TTL } })
    const again = await queue.add(
      'again',
      { v: 'latest' },
      { jobId: customId, deduplication: { id: key, ttl: TTL, replace: true } },
    )
    expect(again.id).toBe(first.id)
    expect(again.outcome).toBe('duplicate-job-id')
    expect(again.data).toEqual({ v: 'first' })
    expect(await t.jobsWithKey(key)).toEqual([{ id: first.id, state: 'waiting', data: { v: 'first' } }])
    expect((await t.key(key))?.job_id).toBe(first.id)
  })

  it('a new jobId with a held key: the key owner answers', async () => {
    const key = newKey('jobid-key-held')
    const first = await queue.add(
      'first',
      { v: 'first' },
      { jobId: newKey('custom'), deduplication: { id: key, ttl: TTL } },
    )
    const other = await queue.add(
      'other',
      { v: 'other' },
      { jobId: newKey('custom'), deduplication: { id: key, ttl: TTL } },
    )
    expect(other.id).toBe(first.id)
    expect(other.outcome).toBe('duplicate-key')
    expect(other.jobId).toBe(first.jobId)
  })

  it('a terminal jobId does not answer; the key, still held by its TTL, does', async () => {
    const customId = newKey('custom')
    const key = newKey('jobid-terminal')
    const first = await queue.add('first', { v: 'first' }, { jobId: customId, deduplication: { id: key, ttl: TTL } })
    await t.makeTerminal(first.id, 'completed')
    const again = await queue.add('again', { v: 'again' }, { jobId: customId, deduplication: { id: key, ttl: TTL } })
    expect(again.id).toBe(first.id)
    expect(again.outcome).toBe('duplicate-key')
    const replaced = await queue.add(
      'again',
      { v: 'latest' },
      { jobId: customId, deduplication: { id: key, ttl: TTL, replace: true } },
    )
    expect(replaced.outcome).toBe('replaced')
    expect(replaced.jobId).toBe(customId)
    expect((await t.key(key))?.job_id).toBe(replaced.id)
    expect((await queue.getJobByCustomId(customId))?.id).toBe(replaced.id)
  })
})
