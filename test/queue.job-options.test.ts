// delay, priority, attempts and backoff are stored on the row (from the database clock) by add and addBulk alike.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type JobOptions, Queue } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema
let queue: Queue

beforeAll(async () => {
  db = await freshSchema('job_options')
  queue = new Queue('options', { connectionString: db.url, schema: db.schema })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

interface StoredOptions {
  state: string
  delay_ms: number
  priority: number
  max_attempts: number
  backoff: unknown
  attempts: number
}

async function stored(id: string): Promise<StoredOptions> {
  const { rows } = await db.pool.query(
    `select state, round(extract(epoch from run_at - created_at) * 1000)::float8 as delay_ms,
            priority, max_attempts, backoff, attempts
     from "${db.schema}".jobs where id = $1`,
    [id],
  )
  return rows[0]
}

const cases: [string, JobOptions, StoredOptions][] = [
  ['defaults', {}, { state: 'waiting', delay_ms: 0, priority: 0, max_attempts: 1, backoff: null, attempts: 0 }],
  [
    'delay 0 is not delayed',
    { delay: 0 },
    { state: 'waiting', delay_ms: 0, priority: 0, max_attempts: 1, backoff: null, attempts: 0 },
  ],
  [
    'delay',
    { delay: 90_250 },
    { state: 'delayed', delay_ms: 90_250, priority: 0, max_attempts: 1, backoff: null, attempts: 0 },
  ],
  [
    'a long delay',
    { delay: 30 * 86_400_000 },
    { state: 'delayed', delay_ms: 30 * 86_400_000, priority: 0, max_attempts: 1, backoff: null, attempts: 0 },
  ],
  [
    'priority',
    { priority: 7 },
    { state: 'waiting', delay_ms: 0, priority: 7, max_attempts: 1, backoff: null, attempts: 0 },
  ],
  [
    'attempts',
    { attempts: 5 },
    { state: 'waiting', delay_ms: 0, priority: 0, max_attempts: 5, backoff: null, attempts: 0 },
  ],
  [
    'fixed backoff as a number',
    { backoff: 1_500 },
    {
      state: 'waiting',
      delay_ms: 0,
      priority: 0,
      max_attempts: 1,
      backoff: { type: 'fixed', delay: 1_500 },
      attempts: 0,
    },
  ],
  [
    'exponential backoff with jitter',
    { attempts: 3, backoff: { type: 'exponential', delay: 200, jitter: 0.25 } },
    {
      state: 'waiting',
      delay_ms: 0,
      priority: 0,
      max_attempts: 3,
      backoff: { type: 'exponential', delay: 200, jitter: 0.25 },
      attempts: 0,
    },
  ],
  [
    'all together',
    { delay: 1_000, priority: 2, attempts: 4, backoff: { type: 'fixed', delay: 10 } },
    {
      state: 'delayed',
      delay_ms: 1_000,
      priority: 2,
      max_attempts: 4,
      backoff: { type: 'fixed', delay: 10 },
      attempts: 0,
    },
  ],
]

describe('job options are stored', () => {
  for (const [label, opts, expected] of cases) {
    it(`add: ${label}`, async () => {
      const job = await queue.add('x', {}, opts)
      expect(await stored(job.id)).toEqual(expected)
      expect(job).toMatchObject({
        state: expected.state,
        priority: expected.priority,
        maxAttempts: expected.max_attempts,
        backoff: expected.backoff,
      })
    })

    it(`addBulk and add with a jobId: ${label}`, async () => {
      const [plain, withId] = await queue.addBulk([
        { name: 'x', data: {}, opts },
        { name: 'x', data: {}, opts: { ...opts, jobId: `opts-${label}` } },
      ])
      expect(await stored(plain?.id as string)).toEqual(expected)
      expect(await stored(withId?.id as string)).toEqual(expected)
    })
  }

  it('run_at is computed from the database clock', async () => {
    const job = await queue.add('x', {}, { delay: 60_000 })
    const { rows } = await db.pool.query(
      `select extract(epoch from run_at - now()) * 1000 as until_due_ms from "${db.schema}".jobs where id = $1`,
      [job.id],
    )
    // Between the add and this query only the round trip passed (generously bounded for a loaded machine).
    expect(Number(rows[0].until_due_ms)).toBeGreaterThan(60_000 - 30_000)
    expect(Number(rows[0].until_due_ms)).toBeLessThanOrEqual(60_000)
  })
})
