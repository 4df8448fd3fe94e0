// Key lookup and removal: getDeduplicationJobId, queue.removeDeduplicationKey, and generation-safe job.removeDeduplicationKey.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, ValidationError } from '../src/index.js'
import { type DedupTables, closeDedupSuite, openDedupSuite } from './helpers/dedup-fixture.js'
import type { TestSchema } from './helpers/schema.js'

type Payload = { v: string }

const QUEUE = 'dedup-release'
const TTL = 3_600_000

let db: TestSchema
let queue: Queue<Payload>
let t: DedupTables<Payload>
let seq = 0

beforeAll(async () => ({ db, queue, t } = await openDedupSuite<Payload>('dedup_release', QUEUE)))
afterAll(() => closeDedupSuite({ db, queue }))

const newKey = (label: string) => `${label}:${++seq}`

describe('queue.getDeduplicationJobId', () => {
  it('is the owner id while the key is held, with or without a TTL', async () => {
    const withTtl = newKey('lookup-ttl')
    const noTtl = newKey('lookup-no-ttl')
    const a = await queue.add('a', { v: 'a' }, { deduplication: { id: withTtl, ttl: TTL } })
    const b = await queue.add('b', { v: 'b' }, { deduplication: { id: noTtl } })
    expect(await queue.getDeduplicationJobId(withTtl)).toBe(a.id)
    expect(await queue.getDeduplicationJobId(noTtl)).toBe(b.id)
    await t.makeActive(b.id)
    expect(await queue.getDeduplicationJobId(noTtl)).toBe(b.id)
    // A TTL key outlives its finished job.
    await t.makeTerminal(a.id, 'completed')
    expect(await queue.getDeduplicationJobId(withTtl)).toBe(a.id)
  })

  it('is null for a key never taken, or taken in another queue', async () => {
    const key = newKey('lookup-absent')
    const other = new Queue<Payload>(`${QUEUE}-other`, { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      await other.add('x', { v: 'x' }, { deduplication: { id: key, ttl: TTL } })
      expect(await queue.getDeduplicationJobId(key)).toBeNull()
    } finally {
      await other.close()
    }
  })

  it('is null once the key expired, even though its row is still there', async () => {
    const key = newKey('lookup-expired')
    await queue.add('a', { v: 'a' }, { deduplication: { id: key, ttl: TTL } })
    await t.expire(key)
    expect(await t.keyOwner(key)).toBeDefined()
    expect(await queue.getDeduplicationJobId(key)).toBeNull()
  })

  it('is null once a no-TTL owner is terminal', async () => {
    for (const state of ['completed', 'failed'] as const) {
      const key = newKey(`lookup-terminal-${state}`)
      const job = await queue.add('a', { v: 'a' }, { deduplication: { id: key } })
      await t.makeTerminal(job.id, state)
      expect(await queue.getDeduplicationJobId(key)).toBeNull()
    }
  })

  it('is null when the owner row was deleted by hand (orphan), and the next add proceeds', async () => {
    const key = newKey('lookup-orphan')
    const job = await queue.add('a', { v: 'a' }, { deduplication: { id: key, ttl: TTL } })
    await t.deleteJob(job.id)
    expect(await queue.getDeduplicationJobId(key)).toBeNull()
    const next = await queue.add('b', { v: 'b' }, { deduplication: { id: key, ttl: TTL } })
    expect(next.outcome).toBe('added')
    expect(await queue.getDeduplicationJobId(key)).toBe(next.id)
  })

  it('rejects a bad key before any I/O', async () => {
    for (const bad of ['', 'a\u0000b', 'x'.repeat(256), 42]) {
      const err = await queue.getDeduplicationJobId(bad as string).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).field).toBe('key')
    }
  })
})

describe('queue.removeDeduplicationKey', () => {
  it('removes a held key so that the next add creates a new job; true', async () => {
    const key = newKey('remove-held')
    const first = await queue.add('a', { v: 'a' }, { deduplication: { id: key, ttl: TTL } })
    expect(await queue.removeDeduplicationKey(key)).toBe(true)
    expect(await t.keyOwner(key)).toBeUndefined()
    expect(await queue.getDeduplicationJobId(key)).toBeNull()
    // The job itself is untouched: removing a key never removes work.
    expect((await queue.getJob(first.id))?.state).toBe('waiting')
    const second = await queue.add('b', { v: 'b' }, { deduplication: { id: key, ttl: TTL } })
    expect(second.outcome).toBe('added')
    expect(second.id).not.toBe(first.id)
    expect(await t.keyOwner(key)).toBe(second.id)
  })

  it('removes a held no-TTL key of a running job; true', async () => {
    const key = newKey('remove-active')
    const job = await queue.add('a', { v: 'a' }, { deduplication: { id: key } })
    await t.makeActive(job.id)
    expect(await queue.removeDeduplicationKey(key)).toBe(true)
    expect(await t.keyOwner(key)).toBeUndefined()
  })

  it('is false for an expired key (and clears its row), an absent key, an orphan and a released no-TTL key', async () => {
    const expired = newKey('remove-expired')
    await queue.add('a', { v: 'a' }, { deduplication: { id: expired, ttl: TTL } })
    await t.expire(expired)
    expect(await queue.removeDeduplicationKey(expired)).toBe(false)
    expect(await t.keyOwner(expired)).toBeUndefined()

    expect(await queue.removeDeduplicationKey(newKey('remove-absent'))).toBe(false)

    const orphan = newKey('remove-orphan')
    const o = await queue.add('a', { v: 'a' }, { deduplication: { id: orphan, ttl: TTL } })
    await t.deleteJob(o.id)
    expect(await queue.removeDeduplicationKey(orphan)).toBe(false)

    const done = newKey('remove-done')
    const d = await queue.add('a', { v: 'a' }, { deduplication: { id: done } })
    await t.makeTerminal(d.id, 'completed')
    expect(await queue.removeDeduplicationKey(done)).toBe(false)
  })

  it('removes the key whoever owns it, including a newer generation', async () => {
    const key = newKey('remove-any-owner')
    const gen1 = await queue.add('a', { v: 'gen1' }, { deduplication: { id: key, ttl: TTL } })
    await t.makeActive(gen1.id)
    const gen2 = await queue.add('a', { v: 'gen2' }, { deduplication: { id: key, ttl: TTL, replace: true } })
    expect(await t.keyOwner(key)).toBe(gen2.id)
    expect(await queue.removeDeduplicationKey(key)).toBe(true)
    expect(await t.keyOwner(key)).toBeUndefined()
  })
})

describe('job.removeDeduplicationKey is generation-safe', () => {
  it('generation 1 finishing after generation 2 took the key cannot release it', async () => {
    const key = newKey('generations')
    const gen1 = await queue.add('push', { v: 'gen1' }, { deduplication: { id: key } })
    await t.makeActive(gen1.id)
    const gen2 = await queue.add('push', { v: 'gen2' }, { deduplication: { id: key, replace: true } })
    expect(gen2.outcome).toBe('replaced')
    expect(await t.keyOwner(key)).toBe(gen2.id)

    // Generation 1 finishes and tries to release "its" key.
    await t.makeTerminal(gen1.id, 'completed')
    expect(await gen1.removeDeduplicationKey()).toBe(false)
    expect(await t.keyOwner(key)).toBe(gen2.id)
    expect(await queue.getDeduplicationJobId(key)).toBe(gen2.id)
    const dup = await queue.add('push', { v: 'gen3?' }, { deduplication: { id: key } })
    expect(dup.id).toBe(gen2.id)
    expect(dup.outcome).toBe('duplicate-key')

    // The owning generation can.
    expect(await gen2.removeDeduplicationKey()).toBe(true)
    expect(await t.keyOwner(key)).toBeUndefined()
    expect(await gen2.removeDeduplicationKey()).toBe(false)
  })

  it('works on a job read back by id, and is false for a job added without a key', async () => {
    const key = newKey('by-id')
    const added = await queue.add('push', { v: 'x' }, { deduplication: { id: key, ttl: TTL } })
    const read = await queue.getJob(added.id)
    expect(read?.deduplicationId).toBe(key)
    expect(await read?.removeDeduplicationKey()).toBe(true)
    expect(await t.keyOwner(key)).toBeUndefined()

    const plain = await queue.add('push', { v: 'plain' })
    expect(plain.deduplicationId).toBeNull()
    expect(await plain.removeDeduplicationKey()).toBe(false)
  })

  it('answers whether the key was held, as queue.removeDeduplicationKey does: false for an expired TTL key (its row cleared)', async () => {
    const key = newKey('own-expired')
    const owner = await queue.add('push', { v: 'x' }, { deduplication: { id: key, ttl: TTL } })
    await t.expire(key)
    expect(await queue.getDeduplicationJobId(key)).toBeNull()
    expect(await owner.removeDeduplicationKey()).toBe(false)
    expect(await t.keyOwner(key)).toBeUndefined()
  })

  it("a duplicate answer carries the owner, so its removal releases the owner's key", async () => {
    const key = newKey('via-duplicate')
    const owner = await queue.add('push', { v: 'x' }, { deduplication: { id: key, ttl: TTL } })
    const dup = await queue.add('push', { v: 'y' }, { deduplication: { id: key, ttl: TTL } })
    expect(dup.id).toBe(owner.id)
    expect(await dup.removeDeduplicationKey()).toBe(true)
    expect(await t.keyOwner(key)).toBeUndefined()
  })
})
