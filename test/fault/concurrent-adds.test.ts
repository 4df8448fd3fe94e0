// Fault suite, concurrent adds that collide:
// - adds of one jobId / one dedup key waiting on a transaction that inserted it first and then rolls back. Guarantee:
//   one waiter inserts, every other waiter is answered with that job, and nobody is told "duplicate" of a job that
//   does not exist (every answered id is a stored row). When the first transaction commits instead, every waiter is
//   answered with its job.
// - concurrent addBulk calls over the same jobIds and keys in opposite orders, 2 sessions × 100 loops. Guarantee: no
//   deadlock (or any other error) reaches a caller, both sessions are answered with the same job per jobId / key, and
//   no jobId or key has two live jobs.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Job, Queue } from '../../src/index.js'
import { type TestSchema, freshSchema, namedSessionUrl } from '../helpers/schema.js'
import { waitFor } from '../helpers/wait.js'

let db: TestSchema
let queue: Queue
let other: Queue
/** The waiting adds' connections, told apart in pg_stat_activity by their application_name. */
let waitersUrl: string
let viaSqlPool: pg.Pool

beforeAll(async () => {
  db = await freshSchema('fault_adds')
  waitersUrl = namedSessionUrl(db.url, `fault-adds ${db.schema}`)
  queue = new Queue('adds', { connectionString: waitersUrl, schema: db.schema, migrate: false })
  other = new Queue('adds', { connectionString: waitersUrl, schema: db.schema, migrate: false })
  viaSqlPool = new pg.Pool({ connectionString: waitersUrl, max: 2 })
})
afterAll(async () => {
  await queue?.close()
  await other?.close()
  await viaSqlPool?.end()
  await db?.drop()
})

/** The waiting adds' backends (Queues and SQL) that wait on a lock. */
async function lockWaiters(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from pg_stat_activity where application_name = $1 and wait_event_type = 'Lock'`,
    [`fault-adds ${db.schema}`],
  )
  return rows[0]!.n
}

async function stored(ids: string[]): Promise<Set<string>> {
  const { rows } = await db.pool.query<{ id: string }>(`select id::text from "${db.schema}".jobs where id = any($1)`, [
    ids,
  ])
  return new Set(rows.map((r) => r.id))
}

type Opts = { jobId: string } | { deduplication: { id: string; replace?: boolean; ttl?: number } }

describe.each([
  ['one jobId', (n: number): Opts => ({ jobId: `rollback-${n}` })],
  ['one dedup key', (n: number): Opts => ({ deduplication: { id: `rollback-${n}` } })],
  ['one dedup key with a TTL', (n: number): Opts => ({ deduplication: { id: `rollback-ttl-${n}`, ttl: 60_000 } })],
  [
    'one dedup key with replace',
    (n: number): Opts => ({ deduplication: { id: `rollback-replace-${n}`, replace: true } }),
  ],
])('concurrent adds of %s while the first transaction holds it', (_what, opts) => {
  for (const ending of ['rollback', 'commit'] as const) {
    it(`first transaction ends with ${ending}: the answers all name one stored job`, async () => {
      const n = Math.floor(Math.random() * 1e9)
      const o = opts(n)
      const client = new pg.Client({ connectionString: db.url })
      await client.connect()
      try {
        await client.query('begin')
        const first = await queue.add('first', { who: 'first' }, { ...o, tx: client })
        const waitersBefore = await lockWaiters()
        // Waiters through every path: add (two Queues, two pools), addBulk, and the SQL function.
        const viaSql = viaSqlPool.query<{ id: string; outcome: string }>(
          `select (a.job).id::text as id, a.outcome from "${db.schema}".add_job(queue => 'adds', name => 'sql',
             job_id => $1, dedup_id => $2, dedup_ttl_ms => $3, dedup_replace => $4) a`,
          'jobId' in o
            ? [o.jobId, null, null, false]
            : [null, o.deduplication.id, o.deduplication.ttl ?? null, o.deduplication.replace ?? false],
        )
        const waiters: Promise<Job>[] = [
          queue.add('w1', { who: 'w1' }, o),
          other.add('w2', { who: 'w2' }, o),
          other.addBulk([{ name: 'w3', data: { who: 'w3' }, opts: o }]).then((jobs) => jobs[0]!),
        ]
        await waitFor(
          async () => (await lockWaiters()) - waitersBefore >= 4,
          10_000,
          'the four waiters to block on the first transaction',
        )
        await client.query(ending)
        const answers = await Promise.all(waiters)
        const sql = (await viaSql).rows[0]!
        const ids = [...answers.map((a) => a.id), sql.id]
        const outcomes = [...answers.map((a) => a.outcome as string), sql.outcome]

        const exist = await stored([...ids, first.id])
        const replace = 'deduplication' in o && o.deduplication.replace === true
        if (ending === 'rollback') expect(exist.has(first.id)).toBe(false)
        if (replace) {
          // Each replace supersedes the one before (so earlier answers are gone by now): exactly one answered job is
          // left, it owns the key, and it is the key's only live job. One waiter inserted (after a rollback), the others
          // replaced.
          const left = [...ids, first.id].filter((id) => exist.has(id))
          expect(left).toHaveLength(1)
          expect(await queue.getDeduplicationJobId(o.deduplication.id)).toBe(left[0])
          const { rows } = await db.pool.query<{ n: number }>(
            `select count(*)::int as n from "${db.schema}".jobs where dedup_key = $1`,
            [o.deduplication.id],
          )
          expect(rows[0]!.n).toBe(1)
          expect(outcomes.filter((x) => x === 'added')).toHaveLength(ending === 'commit' ? 0 : 1)
          expect(outcomes.filter((x) => x !== 'added' && x !== 'replaced')).toEqual([])
        } else {
          expect(
            ids.filter((id) => !exist.has(id)),
            'answered with a job that does not exist',
          ).toEqual([])
          if (ending === 'commit') expect(exist.has(first.id)).toBe(true)
          const winner = ending === 'commit' ? first.id : ids.find((_, i) => outcomes[i] === 'added')
          expect(winner, 'one waiter inserted').toBeDefined()
          expect(outcomes.filter((x) => x === 'added')).toHaveLength(ending === 'commit' ? 0 : 1)
          expect(new Set(ids)).toEqual(new Set([winner]))
          const { rows } = await db.pool.query<{ n: number }>(
            `select count(*)::int as n from "${db.schema}".jobs where ${'jobId' in o ? 'job_id' : 'dedup_key'} = $1`,
            ['jobId' in o ? o.jobId : o.deduplication.id],
          )
          expect(rows[0]!.n).toBe(1)
        }
      } finally {
        await client.query('rollback').catch(() => {})
        await client.end()
      }
    })
  }
})

describe('concurrent addBulk over the same keys in opposite orders', () => {
  it('2 sessions × 100 loops: no deadlock reaches a caller, no duplicate', async () => {
    const items = (loop: number) => [
      // Fresh jobIds and keys each loop (the inserts wait on each other's index entries) ...
      ...Array.from({ length: 6 }, (_, i) => ({ name: 'j', data: { loop, i }, opts: { jobId: `bulk-${loop}-${i}` } })),
      ...Array.from({ length: 6 }, (_, i) => ({
        name: 'k',
        data: { loop, i },
        opts: { deduplication: { id: `bulk-${loop}-${i}` } },
      })),
      // ... and the same keys every loop, replaced (the key rows are locked FOR UPDATE and their owners deleted).
      ...Array.from({ length: 4 }, (_, i) => ({
        name: 'r',
        data: { loop, i },
        opts: { deduplication: { id: `bulk-replace-${i}`, replace: true } },
      })),
    ]
    const errors: unknown[] = []
    const sessions = [queue, other].map(async (q, s) => {
      const answers: Job[][] = []
      for (let loop = 0; loop < 100; loop++) {
        const batch = s === 0 ? items(loop) : items(loop).reverse()
        try {
          const jobs = await q.addBulk(batch)
          answers.push(s === 0 ? jobs : jobs.reverse())
        } catch (err) {
          errors.push(err)
        }
      }
      return answers
    })
    const [a, b] = await Promise.all(sessions)
    expect(errors.map((e) => `${(e as { code?: string }).code}: ${(e as Error).message}`)).toEqual([])
    for (let loop = 0; loop < 100; loop++) {
      // Fresh jobIds and keys: both sessions are answered with the same job, one of them inserted it.
      for (let i = 0; i < 12; i++) {
        expect(a![loop]![i]!.id).toBe(b![loop]![i]!.id)
        expect([a![loop]![i]!.deduplicated, b![loop]![i]!.deduplicated].sort()).toEqual([false, true])
      }
    }
    const { rows: dupJobIds } = await db.pool.query(
      `select job_id, count(*) from "${db.schema}".jobs where job_id like 'bulk-%' group by 1 having count(*) <> 1`,
    )
    expect(dupJobIds).toEqual([])
    const { rows: dupKeys } = await db.pool.query(
      `select dedup_key, count(*) from "${db.schema}".jobs where dedup_key like 'bulk-%' and state = 'waiting'
       group by 1 having count(*) <> 1`,
    )
    expect(dupKeys).toEqual([])
    const {
      rows: [keys],
    } = await db.pool.query<{ n: number; owned: number }>(
      `select count(*)::int as n, count(*) filter (where j.dedup_key = k.key)::int as owned
       from "${db.schema}".dedup_keys k join "${db.schema}".jobs j on j.id = k.job_id where k.key like 'bulk-%'`,
    )
    expect(keys).toEqual({ n: 604, owned: 604 })
  }, 60_000)
})
