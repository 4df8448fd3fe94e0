// The start window (src/worker/job-runner.ts): a worker whose handlers finish faster than a start round trip starts
// claimed-ahead jobs beyond its free slots, so that a freed slot does not idle while a start is in flight; a worker
// with slow handlers starts no job before a slot is free for it (a claimed-ahead job stays pending: a replace, a cancel
// or an idle worker can still take it).

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './support/schema.js'
import { recordingPool } from './fixtures/recording-pool.js'
import { waitFor } from './fixtures/worker-helpers.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_start_window')
})
afterAll(async () => {
  await db.drop()
})

/** Drains `total` queued jobs of `queue`; returns how many jobs each statement made active, and each job's runs. */
async function drain(queue: string, total: number, concurrency: number, handlerMs: number) {
  await db.pool.query(
    `insert into "${db.schema}".jobs (queue, name, data) select $1, 'n', '{}' from generate_series(1, $2)`, [queue, total])
  // Jobs made active per statement: a claim's third parameter (how many it starts), a start step's fourth (the ids).
  const started: number[] = []
  const pool = recordingPool(db, 8, (text, values) => {
    if (text.startsWith('-- Claims up to')) started.push(Number(values?.[2]))
    else if (text.startsWith('-- A worker\'s step') && (values?.[3] as unknown[]).length > 0) started.push((values?.[3] as unknown[]).length)
  })
  const runs = new Map<string, number>()
  const worker = new Worker(queue, async (job) => {
    runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
    if (handlerMs > 0) await new Promise((resolve) => setTimeout(resolve, handlerMs))
  }, { pool, schema: db.schema, concurrency, batchSize: 100, pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false })
  try {
    await worker.run()
    await waitFor(async () => {
      const { rows } = await db.pool.query(
        `select count(*)::int as n from "${db.schema}".jobs where queue = $1 and state = 'completed'`, [queue])
      return rows[0].n === total
    }, 60_000, 'every job to complete')
  } finally {
    await worker.close()
    await pool.end()
  }
  return { started, runs }
}

describe('the start window', () => {
  it('fast handlers: statements start more jobs than there are slots, and every job still runs once', async () => {
    const { started, runs } = await drain('fast', 4_000, 2, 0)
    expect(runs.size).toBe(4_000)
    expect([...runs.values()].every((n) => n === 1)).toBe(true)
    // Without the window a statement starts at most the free slots (2); with it, as many as the handlers finish
    // within a start round trip.
    const beyond = started.filter((n) => n > 2)
    expect(beyond.length, `jobs started per statement: ${started.join(' ')}`).toBeGreaterThan(started.length / 4)
  }, 90_000)

  it('slow handlers: no statement starts more jobs than there are slots (claimed-ahead jobs stay pending)', async () => {
    // 100 ms handlers, 2 slots: 0.02 jobs finish per ms, fewer than one within any start round trip below 50 ms.
    const { started, runs } = await drain('slow', 40, 2, 100)
    expect(runs.size).toBe(40)
    expect(started.length).toBeGreaterThan(10)
    expect(Math.max(...started), `jobs started per statement: ${started.join(' ')}`).toBeLessThanOrEqual(2)
  }, 90_000)

  it('a job started ahead whose slot a slow handler holds goes back to the queue (run not counted), and runs once later', async () => {
    // 400 fast jobs (the pace opens the window), then one that blocks the only slot, then 10 more: those the window
    // started behind the blocking one must not stay active while it runs.
    await db.pool.query(
      `insert into "${db.schema}".jobs (queue, name, data)
       select 'mixed', 'n', jsonb_build_object('v', case when g <= 400 then 'fast' when g = 401 then 'block' else 'after' end)
       from generate_series(1, 411) g`)
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    const runs = new Map<string, number>()
    const worker = new Worker<{ v: string }>('mixed', async (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
      if (job.data.v === 'block') await gate
    }, { connectionString: db.url, schema: db.schema, concurrency: 1, batchSize: 100, pollIntervalMs: 100, maintenanceIntervalMs: 0, migrate: false })
    const active = async (): Promise<number> => (await db.pool.query(
      `select count(*)::int as n from "${db.schema}".jobs where queue = 'mixed' and state = 'active'`)).rows[0].n
    try {
      await waitFor(async () => (await db.pool.query(
        `select 1 from "${db.schema}".jobs where queue = 'mixed' and data->>'v' = 'block' and state = 'active'`)).rowCount === 1,
      30_000, 'the blocking job to start')
      // The bound is max(50 ms, four start round trips); then the release, and the pace settling.
      await new Promise((resolve) => setTimeout(resolve, 600))
      const samples: number[] = []
      for (let i = 0; i < 16; i++) {
        samples.push(await active())
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      expect(samples, 'jobs active while the only slot is blocked').toEqual(samples.map(() => 1))
      open()
      await waitFor(async () => (await db.pool.query(
        `select count(*)::int as n from "${db.schema}".jobs where queue = 'mixed' and state = 'completed'`)).rows[0].n === 411,
      30_000, 'every job to complete')
      expect(runs.size).toBe(411)
      expect([...runs.values()].every((n) => n === 1)).toBe(true)
      const { rows } = await db.pool.query(`select max(attempts)::int as n from "${db.schema}".jobs where queue = 'mixed'`)
      expect(rows[0].n).toBe(1)
    } finally {
      open()
      await worker.close()
    }
  }, 90_000)
})
