// How each add was decided is counted (queue.outcomes) and logged at debug, one line per add, through the logger option.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Logger, Queue } from '../src/index.js'
import { closeDedupSuite, openDedupSuite } from './helpers/dedup-fixture.js'
import type { TestSchema } from './helpers/schema.js'

type Payload = { v: string }
type Level = 'debug' | 'info' | 'warn' | 'error'
interface LogLine {
  level: Level
  bindings: Record<string, unknown>
  obj: unknown
  msg: string | undefined
}

const QUEUE = 'dedup-outcomes'
const TTL = 3_600_000

/** A real (if tiny) Logger that keeps every line it is given, with the bindings of its children. */
function recordingLogger(lines: LogLine[], bindings: Record<string, unknown> = {}): Logger {
  const at = (level: Level) => (obj: object | string, msg?: string) => {
    lines.push({ level, bindings, obj, msg })
  }
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (more) => recordingLogger(lines, { ...bindings, ...more }),
  }
}

let db: TestSchema
let queue: Queue<Payload>
const lines: LogLine[] = []

beforeAll(
  async () =>
    ({ db, queue } = await openDedupSuite<Payload>('dedup_outcomes', QUEUE, { logger: recordingLogger(lines) })),
)
afterAll(() => closeDedupSuite({ db, queue }))

const decisions = () => lines.filter((l) => l.level === 'debug' && l.msg === 'pgonce: add decided')

describe('add outcomes', () => {
  it('are counted and logged once per add, after a known sequence', async () => {
    expect(queue.outcomes.snapshot()).toEqual({})
    const owner = await queue.add('push', { v: '1' }, { deduplication: { id: 'k', ttl: TTL } }) // added
    await queue.add('push', { v: '2' }, { deduplication: { id: 'k', ttl: TTL } }) // duplicate-key
    await queue.add('push', { v: '3' }, { deduplication: { id: 'k', ttl: TTL } }) // duplicate-key
    await queue.add('push', { v: '4' }, { deduplication: { id: 'k', ttl: TTL, extend: true } }) // extended
    const replaced = await queue.add('push', { v: '5' }, { deduplication: { id: 'k', ttl: TTL, replace: true } }) // replaced
    await queue.add('push', { v: '6' }, { jobId: 'custom' }) // added
    await queue.add('push', { v: '7' }, { jobId: 'custom', deduplication: { id: 'k', ttl: TTL } }) // duplicate-job-id
    await queue.addBulk([
      { name: 'push', data: { v: 'b1' }, opts: { deduplication: { id: 'bk', ttl: TTL } } }, // added
      { name: 'push', data: { v: 'b2' }, opts: { deduplication: { id: 'bk', ttl: TTL } } }, // duplicate-key
      { name: 'push', data: { v: 'b3' }, opts: { deduplication: { id: 'bk', ttl: TTL, replace: true } } }, // replaced
      { name: 'push', data: { v: 'b4' } }, // added
    ])

    expect(queue.outcomes.snapshot()).toEqual({
      added: 4,
      'duplicate-key': 3,
      extended: 1,
      replaced: 2,
      'duplicate-job-id': 1,
    })
    expect(queue.outcomes.get('replaced')).toBe(2)

    const logged = decisions()
    expect(logged).toHaveLength(11)
    expect(logged.map((l) => (l.obj as { outcome: string }).outcome)).toEqual([
      'added',
      'duplicate-key',
      'duplicate-key',
      'extended',
      'replaced',
      'added',
      'duplicate-job-id',
      'added',
      'duplicate-key',
      'replaced',
      'added',
    ])
    for (const l of logged) expect(l.bindings).toMatchObject({ component: 'pgonce.queue', queue: QUEUE })
    expect(logged[1]?.obj).toMatchObject({ outcome: 'duplicate-key', jobId: owner.id, key: 'k' })
    expect(logged[4]?.obj).toMatchObject({ outcome: 'replaced', jobId: replaced.id, key: 'k' })
    expect(logged[5]?.obj).toMatchObject({ outcome: 'added', customId: 'custom' })
    // Nothing above debug for ordinary adds.
    expect(lines.filter((l) => l.level !== 'debug')).toEqual([])
  })

  it("a rejected add is counted as 'rejected', as no other outcome, and logs no decision", async () => {
    const owner = await queue.add('push', { v: 'x' }, { deduplication: { id: 'active-key', ttl: TTL } })
    await db.pool.query(`update "${db.schema}".jobs set state = 'active' where id = $1`, [owner.id])
    const before = queue.outcomes.snapshot()
    const logged = decisions().length
    await expect(
      queue.add('push', { v: 'y' }, { deduplication: { id: 'active-key', ttl: TTL, extend: true } }),
    ).rejects.toMatchObject({ code: 'EXTEND_NOT_PENDING' })
    expect(queue.outcomes.snapshot()).toEqual({ ...before, rejected: (before.rejected ?? 0) + 1 })
    expect(decisions()).toHaveLength(logged)
  })

  it('are counted per Queue instance', async () => {
    const other = new Queue<Payload>(QUEUE, { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      await other.add('push', { v: 'x' }, { deduplication: { id: 'k', ttl: TTL } })
      expect(other.outcomes.snapshot()).toEqual({ 'duplicate-key': 1 })
    } finally {
      await other.close()
    }
  })
})
