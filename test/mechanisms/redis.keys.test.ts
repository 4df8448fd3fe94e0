// The cache's key naming: src/cache/keys.ts puts every identity in the bucket Postgres's _cache_bucket() does (the
// trigger and the reader must agree, for any key text), and Redis key names stay plain whatever the key holds.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { KeyNames, claimFact, dedupFact, ledgerFact } from '../../src/cache/keys.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

const KEYS = [
  'notify:push:42:7',
  '',
  ' ',
  'a b c',
  'it\'s "quoted"; drop table jobs; --',
  'ключ',
  '键',
  '🚀🔑',
  'tab\tnew\nline',
  '\\x00 not a nul',
  '{braces}',
  '*?[glob]',
  'k'.repeat(255),
  'é'.repeat(120),
  'pgonce:{x:1}:2:k:q:y',
]

describe('cache key naming', () => {
  let db: TestSchema
  beforeAll(async () => {
    db = await freshSchema('redis_keys')
  })
  afterAll(async () => db?.drop())

  it('every identity falls in the bucket _cache_bucket() gives it', async () => {
    const facts = KEYS.flatMap((k) => [dedupFact('some-queue.1', k), ledgerFact(k), claimFact(k)])
    const { rows } = await db.pool.query<{ b: number }>(
      `select "${db.schema}"._cache_bucket(i) as b from unnest($1::text[]) with ordinality u(i, n) order by n`,
      [facts.map((f) => f.ident)],
    )
    expect(rows.map((r) => r.b)).toEqual(facts.map((f) => f.bucket))
    expect(new Set(facts.map((f) => f.bucket)).size).toBeGreaterThan(10)
  })

  it('names keys by schema, bucket, database, epoch, kind and queue, with the key itself hashed', () => {
    const names = new KeyNames('pgonce', 'abc123def456')
    for (const k of KEYS) {
      const fact = dedupFact('emails', k)
      const name = names.entry(fact, 1796146330221009)
      expect(name).toMatch(/^pgonce:\{pgonce:\d{1,3}\}:abc123def456:1796146330221009:k:emails:[A-Za-z0-9_-]{27}$/)
      expect(names.entry(ledgerFact(k), 7)).toMatch(/^pgonce:\{pgonce:\d{1,3}\}:abc123def456:7:e:[A-Za-z0-9_-]{27}$/)
    }
    expect(names.epoch(3)).toBe('pgonce:{pgonce:3}:abc123def456:epoch')
    expect(names.hold(3)).toBe('pgonce:{pgonce:3}:abc123def456:hold')
    expect(new Set(KEYS.map((k) => names.entry(dedupFact('emails', k), 1))).size).toBe(KEYS.length)
    expect(names.entry(dedupFact('a', 'k'), 1)).not.toBe(names.entry(dedupFact('b', 'k'), 1))
  })
})
