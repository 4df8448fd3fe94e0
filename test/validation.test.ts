// Bad input (docs/validation.md): every case is a ValidationError with its code and field, before any I/O, writing nothing.

import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, ValidationError, migrate } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema
/** Works in db.schema: a rejected call must leave its rows unchanged. */
let live: Queue
/** Points at a schema that does not exist: any I/O (even the first-use migration) would create it. */
let probe: Queue
let probePool: pg.Pool
let probeIo = 0
const neverSchema = `t_never_${randomBytes(4).toString('hex')}`

beforeAll(async () => {
  db = await freshSchema('validation')
  live = new Queue('valid', { connectionString: db.url, schema: db.schema, maxDataBytes: 100 })
  probePool = new pg.Pool({ connectionString: db.url, max: 1 })
  for (const method of ['query', 'connect'] as const) {
    const original = (probePool[method] as (...args: unknown[]) => unknown).bind(probePool)
    ;(probePool as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
      probeIo++
      return original(...args)
    }
  }
  probe = new Queue('valid', { pool: probePool, schema: neverSchema, maxDataBytes: 100 })
})
afterAll(async () => {
  await live.close()
  await probe.close()
  await probePool.end()
  await db.drop()
})

async function tableCounts(): Promise<Record<string, number>> {
  const { rows } = await db.pool.query(`select
    (select count(*)::int from "${db.schema}".jobs) as jobs,
    (select count(*)::int from "${db.schema}".dedup_keys) as keys,
    (select count(*)::int from "${db.schema}".job_dependencies) as deps`)
  return rows[0]
}

/** Expects `call` (on both queues) to reject with exactly this code and field, and to write nothing. */
async function rejects(call: (q: Queue) => Promise<unknown>, code: string, field: string): Promise<void> {
  const before = await tableCounts()
  for (const q of [probe, live]) {
    let err: unknown
    try {
      await call(q)
    } catch (e) {
      err = e
    }
    expect(err, `${code} ${field}`).toBeInstanceOf(ValidationError)
    expect({ code: (err as ValidationError).code, field: (err as ValidationError).field }).toEqual({ code, field })
  }
  expect(await tableCounts()).toEqual(before)
}

const tooLongBytes = 'é'.repeat(128) // 128 characters, 256 UTF-8 bytes
const badTexts: [unknown, string][] = [
  ['', 'EMPTY'],
  [tooLongBytes, 'TOO_LONG'],
  ['a\u0000b', 'NUL_BYTE'],
  ['a\ud800b', 'LONE_SURROGATE'],
  ['\udfff', 'LONE_SURROGATE'],
  [42, 'INVALID_TYPE'],
  [{ id: 'x' }, 'INVALID_TYPE'],
]
const badCounts: [unknown, string][] = [
  [-1, 'OUT_OF_RANGE'],
  [1.5, 'NOT_INTEGER'],
  [Number.NaN, 'NOT_INTEGER'],
  [Number.POSITIVE_INFINITY, 'NOT_INTEGER'],
  [Number.NEGATIVE_INFINITY, 'NOT_INTEGER'],
  ['5', 'INVALID_TYPE'],
  [5n, 'INVALID_TYPE'],
]

class Point {
  constructor(readonly x: number) {}
}

describe('validation', () => {
  it('names, jobIds and dedup keys: empty, over-long in bytes, NUL, lone surrogates, not strings', async () => {
    for (const [value, code] of badTexts) {
      await rejects((q) => q.add(value as string, {}), code, 'name')
      await rejects((q) => q.add('n', {}, { jobId: value as string }), code, 'opts.jobId')
      await rejects((q) => q.add('n', {}, { deduplication: { id: value as string } }), code, 'opts.deduplication.id')
      await rejects((q) => q.getJobByCustomId(value as string), code, 'jobId')
      await rejects((q) => q.getDeduplicationJobId(value as string), code, 'key')
      await rejects((q) => q.removeDeduplicationKey(value as string), code, 'key')
    }
    await rejects((q) => q.add(undefined as never, {}), 'REQUIRED', 'name')
    await rejects((q) => q.add('n', {}, { deduplication: {} as never }), 'REQUIRED', 'opts.deduplication.id')
    // 255 bytes is the limit, counted in bytes, not characters.
    const atLimit = await live.add('é'.repeat(127) + 'a', {}, { jobId: 'x'.repeat(255) })
    expect(atLimit.name).toHaveLength(128)
    await rejects((q) => q.add('n', {}, { jobId: 'x'.repeat(256) }), 'TOO_LONG', 'opts.jobId')
  })

  it('ttl, delay, attempts, priority, backoff: negative, fractional, NaN, Infinity, not numbers; attempts and ttl of 0', async () => {
    for (const [value, code] of badCounts) {
      const v = value as number
      await rejects((q) => q.add('n', {}, { delay: v }), code, 'opts.delay')
      await rejects((q) => q.add('n', {}, { priority: v }), code, 'opts.priority')
      await rejects((q) => q.add('n', {}, { attempts: v }), code, 'opts.attempts')
      await rejects((q) => q.add('n', {}, { deduplication: { id: 'k', ttl: v } }), code, 'opts.deduplication.ttl')
      await rejects((q) => q.add('n', {}, { backoff: v }), code, 'opts.backoff')
      await rejects((q) => q.add('n', {}, { backoff: { type: 'fixed', delay: v } }), code, 'opts.backoff.delay')
    }
    await rejects((q) => q.add('n', {}, { attempts: 0 }), 'OUT_OF_RANGE', 'opts.attempts')
    await rejects(
      (q) => q.add('n', {}, { deduplication: { id: 'k', ttl: 0 } }),
      'OUT_OF_RANGE',
      'opts.deduplication.ttl',
    )
    await rejects((q) => q.add('n', {}, { delay: 2 ** 53 }), 'OUT_OF_RANGE', 'opts.delay')
    await rejects((q) => q.add('n', {}, { priority: 2 ** 31 }), 'OUT_OF_RANGE', 'opts.priority')
    await rejects(
      (q) => q.add('n', {}, { backoff: { type: 'linear' as never, delay: 1 } }),
      'INVALID_TYPE',
      'opts.backoff.type',
    )
    await rejects(
      (q) => q.add('n', {}, { backoff: { type: 'exponential', delay: 1, jitter: 1.5 } }),
      'OUT_OF_RANGE',
      'opts.backoff.jitter',
    )
    await rejects(
      (q) => q.add('n', {}, { backoff: { type: 'exponential', delay: 1, jitter: Number.NaN } }),
      'OUT_OF_RANGE',
      'opts.backoff.jitter',
    )
    await rejects(
      (q) => q.add('n', {}, { deduplication: { id: 'k', extend: true } }),
      'REQUIRED',
      'opts.deduplication.ttl',
    )
    await rejects(
      (q) => q.add('n', {}, { deduplication: { id: 'k', ttl: 5, extend: 'yes' as never } }),
      'INVALID_TYPE',
      'opts.deduplication.extend',
    )
    await rejects(
      (q) => q.add('n', {}, { deduplication: { id: 'k', replace: 1 as never } }),
      'INVALID_TYPE',
      'opts.deduplication.replace',
    )
    await rejects((q) => q.add('n', {}, { deduplication: 'k' as never }), 'INVALID_TYPE', 'opts.deduplication')
    await rejects((q) => q.add('n', {}, { dependsOn: '1' as never }), 'INVALID_TYPE', 'opts.dependsOn')
    await rejects((q) => q.add('n', {}, { dependsOn: ['1', 'abc'] }), 'INVALID_TYPE', 'opts.dependsOn[1]')
    await rejects((q) => q.add('n', {}, { dependsOn: [1 as never] }), 'INVALID_TYPE', 'opts.dependsOn[0]')
    await rejects((q) => q.getJob('abc'), 'INVALID_TYPE', 'id')
    await rejects((q) => q.getJob(7 as never), 'INVALID_TYPE', 'id')
    await rejects((q) => q.getJob('99999999999999999999'), 'INVALID_TYPE', 'id')
  })

  it('data that is not plain JSON, or larger than maxDataBytes (in bytes)', async () => {
    const cycle: Record<string, unknown> = { a: 1 }
    cycle.self = cycle
    const sparse = [1, , 3] // eslint-disable-line no-sparse-arrays
    const cases: [unknown, string, string][] = [
      [{ n: 10n }, 'NOT_JSON', 'data.n'],
      [10n, 'NOT_JSON', 'data'],
      [cycle, 'NOT_JSON', 'data.self'],
      [{ f: () => 1 }, 'NOT_JSON', 'data.f'],
      [{ u: undefined }, 'NOT_JSON', 'data.u'],
      [[1, undefined], 'NOT_JSON', 'data[1]'],
      [{ when: new Date() }, 'NOT_JSON', 'data.when'],
      [new Date(), 'NOT_JSON', 'data'],
      [{ m: new Map([['a', 1]]) }, 'NOT_JSON', 'data.m'],
      [{ s: new Set([1]) }, 'NOT_JSON', 'data.s'],
      [{ p: new Point(1) }, 'NOT_JSON', 'data.p'],
      [{ n: Number.NaN }, 'NOT_JSON', 'data.n'],
      [{ n: Number.POSITIVE_INFINITY }, 'NOT_JSON', 'data.n'],
      [{ deep: { list: [{ sym: Symbol('x') }] } }, 'NOT_JSON', 'data.deep.list[0].sym'],
      [{ a: sparse }, 'NOT_JSON', 'data.a[1]'],
      [{ s: 'nul\u0000inside' }, 'NUL_BYTE', 'data.s'],
      [{ s: 'half \ud83d' }, 'LONE_SURROGATE', 'data.s'],
      [{ ['key\ud800']: 1 }, 'LONE_SURROGATE', 'data.key\ud800'],
      [{ s: 'x'.repeat(200) }, 'TOO_LARGE', 'data'],
      // 47 two-byte characters: 55 characters of JSON but 102 bytes, over the limit of 100.
      [{ s: 'é'.repeat(47) }, 'TOO_LARGE', 'data'],
    ]
    for (const [data, code, field] of cases) {
      await rejects((q) => q.add('n', data), code, field)
      await rejects(
        (q) =>
          q.addBulk([
            { name: 'ok', data: {} },
            { name: 'n', data },
          ]),
        code,
        `items[1].${field}`,
      )
    }
    // Just under the limit in bytes is accepted, and so is exactly the limit (the early size check never counts more).
    const fits = await live.add('fits', { s: 'é'.repeat(45) })
    expect(fits.data).toEqual({ s: 'é'.repeat(45) })
    for (const exact of [
      { s: 'x'.repeat(92) },
      { a: [true, false, null, 1, 'x', [], {}, ...Array(29).fill(0)], k: {} },
    ]) {
      expect(Buffer.byteLength(JSON.stringify(exact))).toBe(100)
      expect((await live.add('exact', exact)).data).toEqual(exact)
    }
  })

  it("data undefined as a whole is stored as {} (add, addBulk, a scheduler's tick); undefined inside it is NOT_JSON", async () => {
    const single = await live.add('none', undefined)
    const [bulk] = await live.addBulk([{ name: 'none', data: undefined }])
    await live.upsertJobScheduler('no-data', { every: 60_000 }, { name: 'tick' })
    const [template] = (await live.getJobSchedulers()).filter((s) => s.id === 'no-data')
    await live.removeJobScheduler('no-data')
    const nulled = await live.add('null', null)
    expect([single?.data, bulk?.data, template?.template.data, nulled.data]).toEqual([{}, {}, {}, null])
    const { rows } = await db.pool.query(
      `select id, data from "${db.schema}".jobs where id = any($1::bigint[]) order by id`,
      [[single?.id, bulk?.id, nulled.id]],
    )
    expect(rows.map((r) => r.data)).toEqual([{}, {}, null])
    await rejects((q) => q.add('n', { a: undefined }), 'NOT_JSON', 'data.a')
  })

  it('a huge value is rejected TOO_LARGE once it passes the limit, without walking the rest', async () => {
    const wide = new Queue('valid', { pool: probePool, schema: neverSchema }) // the default limit: 1 MiB
    // An object of 2,000,000 keys had each value checked and the whole stringified before TOO_LARGE (4 s of a blocked
    // event loop). Now no value is read: the keys alone are past the limit (listing them is the part that remains).
    // 300,000 keys show it as well, at a tenth of the cost of building the object.
    const target: Record<string, number> = {}
    for (let i = 0; i < 300_000; i++) target[`k${i}`] = i
    let reads = 0
    const counted = new Proxy(target, {
      get(t, key, receiver) {
        reads++
        return Reflect.get(t, key, receiver)
      },
    })
    await expect(wide.add('n', counted)).rejects.toMatchObject({
      name: 'ValidationError',
      code: 'TOO_LARGE',
      field: 'data',
    })
    // 1 MiB of JSON holds fewer than 2^20 / 5 of these entries: a check that stops at the limit reads no more.
    expect(reads).toBeLessThan(2 ** 20 / 5)
    // An array of 2,000,000 items is rejected before its first item is read.
    const items = Array.from({ length: 2_000_000 }, (_, i) => i)
    const started = performance.now()
    await expect(wide.add('n', items)).rejects.toMatchObject({
      name: 'ValidationError',
      code: 'TOO_LARGE',
      field: 'data',
    })
    expect(performance.now() - started).toBeLessThan(100)
  })

  it('unknown option keys at every level, and a bad tx', async () => {
    await rejects((q) => q.add('n', {}, { jobid: 'typo' } as never), 'UNKNOWN_OPTION', 'opts.jobid')
    await rejects(
      (q) => q.add('n', {}, { deduplication: { id: 'k', tll: 5 } } as never),
      'UNKNOWN_OPTION',
      'opts.deduplication.tll',
    )
    await rejects(
      (q) => q.add('n', {}, { backoff: { type: 'fixed', delay: 1, jiter: 0.1 } } as never),
      'UNKNOWN_OPTION',
      'opts.backoff.jiter',
    )
    await rejects((q) => q.add('n', {}, 'opts' as never), 'INVALID_TYPE', 'opts')
    await rejects(
      (q) => q.addBulk([{ name: 'n', data: {}, opts: { atempts: 2 } } as never]),
      'UNKNOWN_OPTION',
      'items[0].opts.atempts',
    )
    await rejects((q) => q.addBulk([{ name: 'n', data: {}, delay: 5 } as never]), 'UNKNOWN_OPTION', 'items[0].delay')
    await rejects((q) => q.addBulk([{ name: 'n', data: {} }], { txn: null } as never), 'UNKNOWN_OPTION', 'options.txn')
    for (const tx of [{}, 'client', 42, null, { query: 'select 1' }]) {
      await rejects((q) => q.add('n', {}, { tx: tx as never }), 'INVALID_TYPE', 'opts.tx')
      await rejects((q) => q.addBulk([{ name: 'n', data: {} }], { tx: tx as never }), 'INVALID_TYPE', 'options.tx')
    }
  })

  it('Queue and migrate options: unknown keys, bad schema and queue names, bad numbers, connection', () => {
    const cs = db.url
    const construct = (name: unknown, options: unknown) => () => new Queue(name as string, options as never)
    const cases: [() => unknown, string, string][] = [
      [construct('q', { connectionString: cs, connectionstring: cs }), 'UNKNOWN_OPTION', 'options.connectionstring'],
      [construct('q', { connectionString: cs, retries: 3 }), 'UNKNOWN_OPTION', 'options.retries'],
      [construct('q', { connectionString: cs, schema: 'Public' }), 'INVALID_IDENTIFIER', 'options.schema'],
      [construct('q', { connectionString: cs, schema: 'pg_catalog' }), 'INVALID_IDENTIFIER', 'options.schema'],
      [construct('q', { connectionString: cs, schema: 'information_schema' }), 'INVALID_IDENTIFIER', 'options.schema'],
      [
        construct('q', { connectionString: cs, schema: 'a"; drop schema public; --' }),
        'INVALID_IDENTIFIER',
        'options.schema',
      ],
      [construct('q', { connectionString: cs, schema: '' }), 'INVALID_IDENTIFIER', 'options.schema'],
      [construct('q', { connectionString: cs, schema: 'x'.repeat(49) }), 'INVALID_IDENTIFIER', 'options.schema'],
      [construct('q', { connectionString: cs, schema: 7 }), 'INVALID_IDENTIFIER', 'options.schema'],
      [construct('', { connectionString: cs }), 'INVALID_IDENTIFIER', 'name'],
      [construct('has space', { connectionString: cs }), 'INVALID_IDENTIFIER', 'name'],
      [construct('ünicode', { connectionString: cs }), 'INVALID_IDENTIFIER', 'name'],
      [construct('q'.repeat(129), { connectionString: cs }), 'INVALID_IDENTIFIER', 'name'],
      [construct('a\u0000b', { connectionString: cs }), 'INVALID_IDENTIFIER', 'name'],
      [construct(42, { connectionString: cs }), 'INVALID_IDENTIFIER', 'name'],
      [construct('q', { connectionString: cs, maxDataBytes: 0 }), 'OUT_OF_RANGE', 'options.maxDataBytes'],
      [construct('q', { connectionString: cs, maxDataBytes: 1.5 }), 'NOT_INTEGER', 'options.maxDataBytes'],
      [construct('q', { connectionString: cs, poolSize: 0 }), 'OUT_OF_RANGE', 'options.poolSize'],
      [construct('q', { connectionString: cs, poolSize: Number.NaN }), 'NOT_INTEGER', 'options.poolSize'],
      [construct('q', { connectionString: cs, migrate: 'no' }), 'INVALID_TYPE', 'options.migrate'],
      [construct('q', { connectionString: cs, pool: probePool }), 'CONFLICTING_OPTIONS', 'options.connectionString'],
      [construct('q', {}), 'CONFLICTING_OPTIONS', 'options.connectionString'],
      [construct('q', undefined), 'CONFLICTING_OPTIONS', 'options.connectionString'],
      [construct('q', 'postgres://x'), 'INVALID_TYPE', 'options'],
      [construct('q', { connectionString: '' }), 'INVALID_TYPE', 'options.connectionString'],
      [construct('q', { pool: {} }), 'INVALID_TYPE', 'options.pool'],
      [construct('q', { pool: null }), 'INVALID_TYPE', 'options.pool'],
      [construct('q', { connectionString: cs, logger: console.log }), 'INVALID_TYPE', 'options.logger'],
      [construct('q', { connectionString: cs, logger: { info() {} } }), 'INVALID_TYPE', 'options.logger'],
      [construct('q', { connectionString: cs, connectTimeoutMs: 0 }), 'OUT_OF_RANGE', 'options.connectTimeoutMs'],
      [construct('q', { connectionString: cs, connectTimeoutMs: '5s' }), 'INVALID_TYPE', 'options.connectTimeoutMs'],
      [
        construct('q', { connectionString: cs, statementTimeoutMs: 2 ** 31 }),
        'OUT_OF_RANGE',
        'options.statementTimeoutMs',
      ],
      [
        construct('q', { pool: probePool, statementTimeoutMs: 1000 }),
        'CONFLICTING_OPTIONS',
        'options.statementTimeoutMs',
      ],
    ]
    for (const [call, code, field] of cases) {
      let err: unknown
      try {
        call()
      } catch (e) {
        err = e
      }
      expect(err, `${code} ${field}`).toBeInstanceOf(ValidationError)
      expect({ code: (err as ValidationError).code, field: (err as ValidationError).field }).toEqual({ code, field })
    }
  })

  it('migrate rejects bad options before connecting', async () => {
    const cases: [unknown, string, string][] = [
      [{ connectionString: db.url, schema: 'Bad-Name' }, 'INVALID_IDENTIFIER', 'options.schema'],
      [{ connectionString: db.url, schema: neverSchema, schemas: ['x'] }, 'UNKNOWN_OPTION', 'options.schemas'],
      [{ pool: probePool, schema: 'pg_toast' }, 'INVALID_IDENTIFIER', 'options.schema'],
    ]
    for (const [options, code, field] of cases) {
      await expect(migrate(options as never)).rejects.toMatchObject({ name: 'ValidationError', code, field })
    }
  })

  it("nothing was sent on the probe queue's pool, and its schema was never created", async () => {
    expect(probeIo).toBe(0)
    const { rows } = await db.pool.query('select count(*)::int as n from pg_namespace where nspname = $1', [
      neverSchema,
    ])
    expect(rows[0].n).toBe(0)
  })
})
