// Fault suite, hostile input: quotes and SQL in every text field, NUL, lone surrogates, emoji, 300-byte keys, data
// nested 10,000 levels deep and 5 MB of data. Guarantee: each is either rejected before any I/O with a typed
// ValidationError naming the field, or stored exactly (read back byte for byte, and by a worker); the database is
// untouched by what was rejected and by what was stored (no table dropped, no row besides the job's own).

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, ValidationError, Worker } from '../../src/index.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'
import { waitFor } from '../helpers/wait.js'

let db: TestSchema
let queue: Queue<unknown>

beforeAll(async () => {
  db = await freshSchema('fault_hostile')
  queue = new Queue('hostile', { connectionString: db.url, schema: db.schema, migrate: false, maxDataBytes: 8 << 20 })
})
afterAll(async () => {
  await queue?.close()
  await db?.drop()
})

/** What the schema holds: its tables and their row counts. Nothing rejected may change it. */
async function footprint(): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ table_name: string }>(
    `select table_name from information_schema.tables where table_schema = $1 order by 1`,
    [db.schema],
  )
  const out: Record<string, number> = {}
  for (const { table_name } of rows) {
    out[table_name] = (
      await db.pool.query<{ n: number }>(`select count(*)::int as n from "${db.schema}"."${table_name}"`)
    ).rows[0]!.n
  }
  return out
}

/** Runs `fn`, which must throw a ValidationError with `code` naming `field`; the schema must be as before. */
async function rejected(fn: () => Promise<unknown>, code: string, field: string | RegExp): Promise<ValidationError> {
  const before = await footprint()
  let caught: unknown
  try {
    await fn()
  } catch (err) {
    caught = err
  }
  expect(caught, 'expected a ValidationError').toBeInstanceOf(ValidationError)
  const err = caught as ValidationError
  expect(err.code).toBe(code)
  if (typeof field === 'string') expect(err.field).toBe(field)
  else expect(err.field).toMatch(field)
  expect(await footprint()).toEqual(before)
  return err
}

const nested = (depth: number): unknown => {
  let v: unknown = 'bottom'
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { d: v }
  return v
}

const SQL = `'); DROP TABLE jobs; --`
const hostileTexts = [
  `it's "quoted" \\ back\`tick`,
  SQL,
  `${SQL.replace('jobs', `"${'x'}".jobs`)}`,
  '😀 emoji 👩‍👩‍👧 ✓',
  '$1 $$ :PGONCE_SCHEMA %s %I',
]

describe('hostile text is stored exactly and runs nothing', () => {
  it('quotes, SQL and emoji in name, jobId, dedup key and data (keys and values) round-trip byte for byte', async () => {
    const before = await footprint()
    let n = 0
    for (const text of hostileTexts) {
      n++
      const data = { [text]: text, list: [text, { nested: text }] }
      const job = await queue.add(text, data, { jobId: `${text}#${n}`, deduplication: { id: `${text}@${n}` } })
      expect(job.deduplicated).toBe(false)
      const {
        rows: [row],
      } = await db.pool.query<{ name: string; job_id: string; dedup_key: string; data: unknown }>(
        `select name, job_id, dedup_key, data from "${db.schema}".jobs where id = $1`,
        [job.id],
      )
      expect(row).toEqual({ name: text, job_id: `${text}#${n}`, dedup_key: `${text}@${n}`, data })
      expect((await queue.getJob(job.id))?.data).toEqual(data)
      expect((await queue.getJobByCustomId(`${text}#${n}`))?.id).toBe(job.id)
      expect(await queue.getDeduplicationJobId(`${text}@${n}`)).toBe(job.id)
      // The same again: answered by the stored job, not stored twice.
      const again = await queue.add(text, data, { jobId: `${text}#${n}` })
      expect(again).toMatchObject({ id: job.id, deduplicated: true, outcome: 'duplicate-job-id' })
    }
    // Through the SQL API too, with bound parameters.
    const {
      rows: [sqlRow],
    } = await db.pool.query<{ id: string }>(
      `select (a.job).id::text as id from "${db.schema}".add_job(queue => 'hostile', name => $1, data => $2::jsonb, job_id => $1) a`,
      [SQL, JSON.stringify({ q: SQL })],
    )
    expect((await queue.getJob(sqlRow!.id))?.name).toBe(SQL)

    const after = await footprint()
    expect(Object.keys(after)).toEqual(Object.keys(before))
    expect(after.jobs).toBe(before.jobs! + hostileTexts.length + 1)
    expect(after.dedup_keys).toBe(before.dedup_keys! + hostileTexts.length)
  })

  it('a worker receives hostile data exactly as it was added', async () => {
    const q = new Queue('hostile-run', { connectionString: db.url, schema: db.schema, migrate: false })
    const seen = new Map<string, { name: string; data: unknown }>()
    const worker = new Worker(
      'hostile-run',
      async (job) => {
        seen.set(job.id, { name: job.name, data: job.data })
        return job.data
      },
      { connectionString: db.url, schema: db.schema, pollIntervalMs: 100, maintenanceIntervalMs: 0, migrate: false },
    )
    try {
      const added = await q.addBulk(hostileTexts.map((t) => ({ name: t, data: { t, deep: nested(200) } })))
      await waitFor(() => added.every((j) => seen.has(j.id)), 10_000, 'the worker to run every hostile job')
      for (const [i, j] of added.entries())
        expect(seen.get(j.id)).toEqual({ name: hostileTexts[i], data: { t: hostileTexts[i], deep: nested(200) } })
      const rows = await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ result: unknown; data: unknown }>(
            `select result, data from "${db.schema}".jobs where queue = 'hostile-run' and state = 'completed'`,
          )
          return rows.length === hostileTexts.length ? rows : undefined
        },
        10_000,
        'every hostile job to be completed',
      )
      for (const r of rows) expect(r.result).toEqual(r.data)
    } finally {
      await worker.close()
      await q.close()
    }
  })
})

describe('bad text is rejected with a typed error naming the field, before any I/O', () => {
  const nul = 'a\u0000b'
  const lone = 'a\uD800b'
  const tooLong = 'k'.repeat(300)
  const tooLongEmoji = '😀'.repeat(64) // 256 bytes

  it.each([
    ['NUL in the name', () => queue.add(nul, {}), 'NUL_BYTE', 'name'],
    ['NUL in a jobId', () => queue.add('n', {}, { jobId: nul }), 'NUL_BYTE', 'opts.jobId'],
    [
      'NUL in a dedup key',
      () => queue.add('n', {}, { deduplication: { id: nul } }),
      'NUL_BYTE',
      'opts.deduplication.id',
    ],
    ['NUL in a data string', () => queue.add('n', { a: [1, nul] }), 'NUL_BYTE', 'data.a[1]'],
    ['NUL in a data key', () => queue.add('n', { [nul]: 1 }), 'NUL_BYTE', `data.${nul}`],
    ['a lone surrogate in the name', () => queue.add(lone, {}), 'LONE_SURROGATE', 'name'],
    ['a lone surrogate in a jobId', () => queue.add('n', {}, { jobId: lone }), 'LONE_SURROGATE', 'opts.jobId'],
    [
      'a lone surrogate in a dedup key',
      () => queue.add('n', {}, { deduplication: { id: '\uDC00' } }),
      'LONE_SURROGATE',
      'opts.deduplication.id',
    ],
    ['a lone surrogate in data', () => queue.add('n', { s: lone }), 'LONE_SURROGATE', 'data.s'],
    ['a 300-byte name', () => queue.add(tooLong, {}), 'TOO_LONG', 'name'],
    ['a 300-byte jobId', () => queue.add('n', {}, { jobId: tooLong }), 'TOO_LONG', 'opts.jobId'],
    [
      'a 300-byte dedup key',
      () => queue.add('n', {}, { deduplication: { id: tooLong } }),
      'TOO_LONG',
      'opts.deduplication.id',
    ],
    [
      'a 256-byte emoji key (64 characters)',
      () => queue.add('n', {}, { deduplication: { id: tooLongEmoji } }),
      'TOO_LONG',
      'opts.deduplication.id',
    ],
    [
      'a 300-byte key in a batch',
      () =>
        queue.addBulk([
          { name: 'n', data: {} },
          { name: 'n', data: {}, opts: { jobId: tooLong } },
        ]),
      'TOO_LONG',
      'items[1].opts.jobId',
    ],
    ['a 300-byte key looked up', () => queue.getDeduplicationJobId(tooLong), 'TOO_LONG', 'key'],
  ] as const)('%s', async (_what, fn, code, field) => {
    await rejected(fn, code, field)
  })

  it('a key of exactly 255 bytes (emoji included) is stored exactly', async () => {
    const key = `${'😀'.repeat(63)}abc` // 252 + 3 bytes
    expect(Buffer.byteLength(key)).toBe(255)
    const job = await queue.add('n', {}, { jobId: key, deduplication: { id: key } })
    const {
      rows: [row],
    } = await db.pool.query<{ job_id: string; dedup_key: string }>(
      `select job_id, dedup_key from "${db.schema}".jobs where id = $1`,
      [job.id],
    )
    expect(row).toEqual({ job_id: key, dedup_key: key })
  })
})

describe('huge and deep data', () => {
  it('data nested 10,000 levels deep is a ValidationError (TOO_DEEP) naming the field, not a RangeError', async () => {
    const err = await rejected(() => queue.add('deep', nested(10_000)), 'TOO_DEEP', 'data')
    expect(err.message).toMatch(/nested more than \d+ levels/)
    await rejected(
      () =>
        queue.addBulk([
          { name: 'ok', data: {} },
          { name: 'deep', data: nested(10_000) },
        ]),
      'TOO_DEEP',
      'items[1].data',
    )
  })

  it('data at the depth limit is stored exactly; one level more is rejected', async () => {
    const { MAX_JSON_DEPTH } = await import('../../src/validate.js')
    const atLimit = nested(MAX_JSON_DEPTH - 1) // the top value is level 1
    const job = await queue.add('deep-ok', atLimit)
    expect((await queue.getJob(job.id))?.data).toEqual(atLimit)
    await rejected(() => queue.add('deep', nested(MAX_JSON_DEPTH)), 'TOO_DEEP', 'data')
  })

  it('5 MB of data: TOO_LARGE under the default 1 MiB limit; stored exactly under a larger one', async () => {
    const big = { s: 'x'.repeat(5_000_000), list: Array.from({ length: 1000 }, (_, i) => `😀${i}`) }
    const small = new Queue('hostile', { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      await rejected(() => small.add('big', big), 'TOO_LARGE', 'data')
    } finally {
      await small.close()
    }
    const job = await queue.add('big', big)
    const {
      rows: [row],
    } = await db.pool.query<{ bytes: number; same: boolean }>(
      `select octet_length(data::text)::int as bytes, data = $2::jsonb as same from "${db.schema}".jobs where id = $1`,
      [job.id, JSON.stringify(big)],
    )
    expect(row!.same).toBe(true)
    expect(row!.bytes).toBeGreaterThan(5_000_000)
    expect((await queue.getJob(job.id))?.data).toEqual(big)
  })

  it('the tables are all still there and nobody ran the SQL in the data', async () => {
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    try {
      const { rows } = await client.query<{ t: string | null }>(`select to_regclass($1)::text as t`, [
        `"${db.schema}".jobs`,
      ])
      expect(rows[0]!.t).not.toBeNull()
      expect(Object.keys(await footprint())).toEqual(
        expect.arrayContaining(['jobs', 'dedup_keys', 'processed_effects']),
      )
    } finally {
      await client.end()
    }
  })
})
