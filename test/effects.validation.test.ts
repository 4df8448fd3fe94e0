// Effects rejects bad keys and options with a ValidationError before any I/O, and writes nothing.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, ValidationError } from '../src/index.js'
import { freshSchema, type TestSchema } from './helpers/schema.js'

let db: TestSchema
// Nothing listens on port 1: any I/O would fail with a connection error, not a ValidationError.
const offline = new Effects({ connectionString: 'postgres://postgres@127.0.0.1:1/none' })

beforeAll(async () => {
  db = await freshSchema('effects_validation')
})

afterAll(async () => {
  await offline.close()
  await db.drop()
})

async function rejection(p: Promise<unknown>): Promise<ValidationError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(ValidationError)
  return err as ValidationError
}

describe('Effects input checks', () => {
  it('rejects bad constructor options', () => {
    expect(() => new Effects({ connectionString: db.url, schema: 'Bad-Schema' })).toThrow(ValidationError)
    expect(() => new Effects({ connectionString: db.url, claimTtl: 5 } as never)).toThrow(
      /options\.claimTtl: unknown option/,
    )
    expect(() => new Effects({})).toThrow(/exactly one of connectionString and pool/)
  })

  it('rejects bad runOnce keys, work and options before any I/O', async () => {
    const work = () => {}
    const cases: [Promise<unknown>, string, string][] = [
      [offline.runOnce('', work), 'EMPTY', 'key'],
      [offline.runOnce('a\u0000b', work), 'NUL_BYTE', 'key'],
      [offline.runOnce('\ud800', work), 'LONE_SURROGATE', 'key'],
      [offline.runOnce('x'.repeat(256), work), 'TOO_LONG', 'key'],
      [offline.runOnce(42 as never, work), 'INVALID_TYPE', 'key'],
      [offline.runOnce('k', 'not a function' as never), 'INVALID_TYPE', 'work'],
      [offline.runOnce('k', work, { claimTtl: 0 }), 'OUT_OF_RANGE', 'opts.claimTtl'],
      [offline.runOnce('k', work, { claimTtl: 1.5 }), 'NOT_INTEGER', 'opts.claimTtl'],
      [offline.runOnce('k', work, { claimTtl: Number.POSITIVE_INFINITY }), 'NOT_INTEGER', 'opts.claimTtl'],
      [offline.runOnce('k', work, { doneTtl: -1 }), 'OUT_OF_RANGE', 'opts.doneTtl'],
      [offline.runOnce('k', work, { doneTtl: Number.NaN }), 'NOT_INTEGER', 'opts.doneTtl'],
      [offline.runOnce('k', work, { claimTTL: 5 } as never), 'UNKNOWN_OPTION', 'opts.claimTTL'],
    ]
    for (const [p, code, field] of cases) {
      const err = await rejection(p)
      expect([err.code, err.field]).toEqual([code, field])
    }
  })

  it('rejects a bad record tx or key before any I/O', async () => {
    expect((await rejection(offline.record({} as never, 'k'))).field).toBe('tx')
    const err = await rejection(offline.record(db.pool, ''))
    expect([err.code, err.field]).toEqual(['EMPTY', 'key'])
    const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".processed_effects`)
    expect(rows[0]).toEqual({ n: 0 })
  })

  it('a rejected runOnce writes no claim', async () => {
    const effects = new Effects({ connectionString: db.url, schema: db.schema })
    try {
      await rejection(effects.runOnce('k', () => {}, { doneTtl: 0 }))
      const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".execution_claims`)
      expect(rows[0]).toEqual({ n: 0 })
    } finally {
      await effects.close()
    }
  })
})
