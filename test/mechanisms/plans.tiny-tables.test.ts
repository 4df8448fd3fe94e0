// pgonce's statements keep their indexes when the tables were small as a session planned them (migration 000018): a
// session caches one generic plan per statement, made from the statistics of that moment, and on a small table a
// sequential scan is the planner's cheaper choice, which then stays while the table grows. The sessions here plan
// generically at once (plan_cache_mode), as a pooled session does from a statement's sixth run.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../../src/index.js'
import { sqlFor } from '../../src/db/sql-files.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('tiny_plans')
})
afterAll(async () => {
  await db.drop()
})

describe('plans on tables analysed nearly empty', () => {
  it('a keyed or jobId add, first or duplicate, reads jobs and dedup_keys by index', async () => {
    const queue = new Queue('tiny', { connectionString: db.url, schema: db.schema, migrate: false })
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    try {
      const ttl = 3_600_000
      // A few rows in each table: a lookup of one row keeps its index from four (000018).
      await queue.add('seed', { n: 0 }, { deduplication: { id: 'held', ttl } })
      for (let n = 1; n < 5; n++) await queue.add('seed', { n }, { deduplication: { id: `other-${n}`, ttl } })
      await queue.add('seed', { n: 5 }, { jobId: 'live' })
      await db.pool.query(`vacuum analyze "${db.schema}".jobs, "${db.schema}".dedup_keys`)
      await client.query('set plan_cache_mode = force_generic_plan')
      await client.query('begin')
      const answers = [
        await queue.add('x', {}, { deduplication: { id: 'held', ttl }, tx: client }),
        await queue.add('x', {}, { jobId: 'live', tx: client }),
        await queue.add('x', {}, { deduplication: { id: 'new', ttl }, tx: client }),
        await queue.add('x', {}, { jobId: 'new', tx: client }),
        await queue.add('x', {}, { deduplication: { id: 'held', ttl, extend: true }, tx: client }),
      ]
      expect(answers.map((j) => j.state)).toEqual(['waiting', 'waiting', 'waiting', 'waiting', 'waiting'])
      const { rows } = await client.query<{ relname: string; seq_scan: string }>(
        `select relname, seq_scan from pg_stat_xact_user_tables where schemaname = $1 and relname in ('jobs', 'dedup_keys')
         order by relname`,
        [db.schema],
      )
      expect(rows.map((r) => `${r.relname} ${r.seq_scan}`)).toEqual(['dedup_keys 0', 'jobs 0'])
      const { rows: counts } = await client.query<{ relname: string; scans: string }>(
        `select relname, idx_scan as scans from pg_stat_xact_user_tables where schemaname = $1 and relname in ('jobs', 'dedup_keys')
         order by relname`,
        [db.schema],
      )
      expect(counts.every((r) => Number(r.scans) > 0)).toBe(true)
      await client.query('rollback')
    } finally {
      await client.end()
      await queue.close()
    }
  })

  // The worker's statements, each EXPLAINed as the generic plan a session caches, on a table analysed at 60 jobs (a
  // list of ids keeps its index from about 20 rows, a claim's pick from a few dozen; never analysed, at any size: 000018;
  // without the qual, completions scanned the table up to somewhere between 1,000 and 5,000 rows).
  it("the worker's statements and the lookups by id or key never plan a sequential scan", async () => {
    const queue = new Queue('tiny-worker', { connectionString: db.url, schema: db.schema, migrate: false })
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    try {
      await queue.addBulk(Array.from({ length: 60 }, (_, i) => ({ name: 'n', data: { i } })))
      await queue.add('n', {}, { deduplication: { id: 'k1' } })
      await db.pool.query(`vacuum analyze "${db.schema}".jobs, "${db.schema}".dedup_keys`)
      await client.query('set plan_cache_mode = force_generic_plan')
      const ids = '{1,2}'
      const tokens = '{00000000-0000-0000-0000-000000000001,00000000-0000-0000-0000-000000000002}'
      const statements: Array<[string, (string | number | null)[]]> = [
        [
          'claim-jobs',
          ['tiny-worker', 250, 30000, 'w', '00000000-0000-0000-', -2147483648, '-100000000000000000', '0', null],
        ],
        ['release-lost-claim', ['tiny-worker', 'w', '00000000-0000-0000-']],
        ['complete-jobs', [ids, tokens, '{null,null}']],
        ['fail-job', ['1', tokens.slice(1, 37), 'e', 's', 0]],
        ['release-jobs', [ids, tokens, 0]],
        ['heartbeat', [ids, tokens, 30000]],
        ['outcome-recorded', [ids, tokens]],
        ['update-progress', ['1', tokens.slice(1, 37), '1']],
        // One row by id or key (without the qual: a sequential scan below ~400 rows).
        ['get-job', ['tiny-worker', '1']],
        ['get-job-by-custom-id', ['live']],
        ['cancel-job', ['tiny-worker', '1']],
        ['remove-job', ['tiny-worker', '1', 'true']],
        ['retry-job', ['tiny-worker', '1']],
        ['get-dedup-owner', ['tiny-worker', 'k1']],
        ['remove-dedup-key', ['tiny-worker', 'k1', '1', 'true']],
      ]
      const scans: string[] = []
      for (const [name, values] of statements) {
        await client.query(`prepare s_${name.replaceAll('-', '_')} as ${sqlFor(name, db.schema)}`)
        const args = values.map((v) => (v === null ? 'null' : client.escapeLiteral(String(v)))).join(', ')
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(
          `explain execute s_${name.replaceAll('-', '_')}(${args})`,
        )
        const plan = rows.map((r) => r['QUERY PLAN']).join('\n')
        expect(plan, name).toMatch(/Index Scan|Tid Scan|Index Only Scan/)
        if (/Seq Scan on (jobs|dedup_keys)/.test(plan)) scans.push(name)
      }
      expect(scans).toEqual([])
    } finally {
      await client.end()
      await queue.close()
    }
  })
})
