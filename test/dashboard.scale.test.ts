// The dashboard at scale, the part CI can afford: with 60,000 finished jobs in one queue and a few in another, every
// statement each GET route sends is planned without a sequential scan of the jobs table (EXPLAIN of the very text and
// values the route sent), and the counts stop at their cap and report an estimate. bench/dashboard-scale.ts times the
// same routes with 1,000,000 jobs.

import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { dashboard, type DashboardHandler } from '../src/dashboard/index.js'
import { SEARCH_WINDOW } from '../src/dashboard/server/jobs.js'
import { COUNT_CAP } from '../src/dashboard/server/queues.js'
import { type Served, call, serveDashboard } from './helpers/dashboard.js'
import { seedJobs } from './helpers/dashboard-seed.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema
let pool: pg.Pool
let handler: DashboardHandler
let served: Served
const sent: { text: string; values: unknown[] }[] = []

beforeAll(async () => {
  db = await freshSchema('dash_scale')
  await seedJobs(db.pool, db.schema, { queue: 'big', completed: 60_000, failed: 2_000, waiting: 500, delayed: 500 })
  await seedJobs(db.pool, db.schema, { queue: 'small', completed: 20, failed: 5, waiting: 5 })
  await db.pool.query(
    `insert into "${db.schema}".dedup_keys (queue, key, job_id) select queue, 'k' || id, id from "${db.schema}".jobs where state = 'waiting'`,
  )
  // The dashboard on a pool of the test's: every statement of its connections is recorded.
  pool = new pg.Pool({ connectionString: db.url, max: 2 })
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown
    ;(client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const first = args[0] as string | { text: string; values?: unknown[] }
      const text = typeof first === 'string' ? first : first.text
      const values = (typeof first === 'string' ? args[1] : first.values) as unknown[] | undefined
      sent.push({ text, values: values ?? [] })
      return query(...args)
    }
  })
  handler = dashboard({ pool, schema: db.schema })
  served = await serveDashboard(handler)
}, 120_000)

afterAll(async () => {
  await served.close()
  await pool.end()
  await db.drop()
})

/** The plan nodes of `text` with `values` that read the jobs table sequentially. */
async function seqScansOnJobs(text: string, values: unknown[]): Promise<string[]> {
  const { rows } = await db.pool.query<{ 'QUERY PLAN': unknown }>(`explain (format json) ${text}`, values)
  const found: string[] = []
  const walk = (node: Record<string, unknown>) => {
    if (node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'jobs') found.push(JSON.stringify(node))
    for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child)
  }
  walk(((rows[0]?.['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0] as { Plan: Record<string, unknown> }).Plan)
  return found
}

const ROUTES = [
  'queues',
  'jobs?queue=big&state=completed',
  'jobs?queue=big&state=failed',
  'jobs?queue=small&state=completed',
  'jobs?queue=small&state=failed',
  'jobs?queue=big&state=waiting',
  'jobs?queue=big&state=delayed',
  'jobs?queue=big&state=active',
  'jobs?queue=big&state=waiting-children',
  'jobs?state=failed',
  'jobs?queue=big',
  'jobs?search=123',
  'jobs?search=k1000',
  'jobs?queue=small&search=order-1',
  'jobs?queue=big&state=completed&search=%7B%22customer%22%3A7%7D',
  'jobs/5000',
  'keys',
  'keys?queue=big&search=k1*',
  'effects',
  'schedulers',
  'failed',
  'failed?queue=big',
]

it('plans every statement of every GET route without a sequential scan of jobs', async () => {
  for (const route of ROUTES) {
    sent.length = 0
    const { status } = await call(`${served.origin}/api/${route}`)
    expect({ route, status }).toEqual({ route, status: 200 })
    const statements = sent.filter((s) => !/^(begin|commit|rollback|select set_config)/.test(s.text))
    expect(statements.length).toBeGreaterThan(0)
    for (const s of statements) {
      if (s.text.includes('explain (format json)')) continue
      expect({ route, statement: s.text.slice(0, 80), seqScans: await seqScansOnJobs(s.text, s.values) }).toEqual({
        route,
        statement: s.text.slice(0, 80),
        seqScans: [],
      })
    }
  }
}, 120_000)

it('caps the counts and gives the planner’s estimate beyond the cap', async () => {
  const { body } = await call(`${served.origin}/api/queues`)
  const big = body.queues.find((q: { name: string }) => q.name === 'big')
  expect(big.countsEstimated).toEqual(['completed'])
  // ANALYZE's sample is exact enough at this size; the point is "about 60,000", not 10,000.
  expect(big.counts.completed).toBeGreaterThan(50_000)
  expect(big.counts.completed).toBeLessThan(70_000)
  expect(big.counts.failed).toBe(2_000)
  expect(big.counts.waiting).toBe(500)
  expect(big.counts.delayed).toBe(500)
  expect(COUNT_CAP).toBeLessThan(60_000)
  const small = body.queues.find((q: { name: string }) => q.name === 'small')
  expect(small.counts).toMatchObject({ completed: 20, failed: 5, waiting: 5 })
})

it('searches data a window at a time: each page reads at most SEARCH_WINDOW jobs, and following next finds every match once', async () => {
  // customer = n % 1000: 60 of big's 60,000 completed jobs, one in each 1,000.
  const search = encodeURIComponent('{"customer":7}')
  const first = (await call(`${served.origin}/api/jobs?queue=big&state=completed&search=${search}&limit=50`)).body
  // One window of 1,000 jobs holds one match: the page stops there and says where to go on.
  expect(first.jobs).toHaveLength(SEARCH_WINDOW / 1_000)
  expect(first.next).not.toBeNull()
  const found = new Set<string>()
  let after = ''
  let pages = 0
  do {
    const page = (
      await call(`${served.origin}/api/jobs?queue=big&state=completed&search=${search}&limit=50&after=${after}`)
    ).body
    for (const j of page.jobs as { id: string }[]) {
      expect(found.has(j.id)).toBe(false)
      found.add(j.id)
    }
    after = page.next
    pages++
  } while (after !== null && pages < 200)
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::integer as n from "${db.schema}".jobs where queue = 'big' and state = 'completed' and data @> '{"customer":7}'`,
  )
  expect(found.size).toBe(rows[0]?.n)
  expect(found.size).toBe(60)
})

it('extrapolates a busy minute of the throughput from the rate of its newest completions', async () => {
  // 6,000 completions over the last 50 s: the minute holds 6,000, read THROUGHPUT_SAMPLE at a time.
  await seedJobs(db.pool, db.schema, { queue: 'hot', completed: 6_000, spreadMs: 50_000 })
  const { body } = await call(`${served.origin}/api/queues`)
  const hot = body.queues.find((q: { name: string }) => q.name === 'hot')
  expect(hot.throughput.estimated).toBe(true)
  expect(hot.throughput.completedLastHour).toBeGreaterThan(4_500)
  expect(hot.throughput.completedLastHour).toBeLessThan(7_500)
  expect(hot.throughput.perMinute.slice(0, 58)).toEqual(new Array(58).fill(0))
})
