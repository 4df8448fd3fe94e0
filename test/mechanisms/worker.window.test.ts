// The window (src/worker/runner.ts): a worker whose handlers finish faster than a claim's round trip claims beyond its
// free slots (the jobs its handlers finish within two round trips), so that a freed slot does not wait for the next
// claim; a worker with slow handlers claims only its free slots. Jobs claimed beyond the slots that then meet slow
// handlers holding every slot go back to the queue, their run not counted.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Worker } from '../../src/index.js'
import { sqlFor } from '../../src/db/sql-files.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'
import { recordingPool } from '../helpers/recording-pool.js'
import { waitFor } from '../helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_window')
})
afterAll(async () => {
  await db.drop()
})

const count = async (queue: string, state: string, v?: string): Promise<number> =>
  (
    await db.pool.query(
      `select count(*)::int as n from "${db.schema}".jobs where queue = $1 and state = $2 and ($3::text is null or data->>'v' = $3)`,
      [queue, state, v ?? null],
    )
  ).rows[0].n

/** Drains `total` queued jobs of `queue`; returns how many jobs each claim asked for, and each job's runs. */
async function drain(queue: string, total: number, concurrency: number, handlerMs: number) {
  await db.pool.query(
    `insert into "${db.schema}".jobs (queue, name, data) select $1, 'n', '{}' from generate_series(1, $2)`,
    [queue, total],
  )
  const claim = sqlFor('claim-jobs', db.schema)
  const asked: number[] = []
  const pool = recordingPool(db, 8, (text, values) => {
    if (text === claim) asked.push(Number(values?.[1]))
  })
  const runs = new Map<string, number>()
  const worker = new Worker(
    queue,
    async (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
      if (handlerMs > 0) await new Promise((resolve) => setTimeout(resolve, handlerMs))
    },
    {
      pool,
      schema: db.schema,
      concurrency,
      batchSize: 100,
      pollIntervalMs: 60_000,
      maintenanceIntervalMs: 0,
      migrate: false,
    },
  )
  try {
    await worker.run()
    await waitFor(async () => (await count(queue, 'completed')) === total, 60_000, 'every job to complete')
  } finally {
    await worker.close()
    await pool.end()
  }
  return { asked, runs }
}

describe('the window', () => {
  it('fast handlers: claims ask for more jobs than there are slots, and every job still runs once', async () => {
    const { asked, runs } = await drain('fast', 4_000, 2, 0)
    expect(runs.size).toBe(4_000)
    expect([...runs.values()].every((n) => n === 1)).toBe(true)
    // Without the window a claim asks for the free slots (2) at most.
    const beyond = asked.filter((n) => n > 2)
    expect(beyond.length, `jobs asked for per claim: ${asked.join(' ')}`).toBeGreaterThan(asked.length / 4)
  }, 90_000)

  it('slow handlers: no claim asks for more jobs than there are slots', async () => {
    // 400 ms handlers, 2 slots: 0.005 jobs finish per ms, so the window (what they finish in two round trips) stays
    // below one job unless a claim takes 100 ms.
    const { asked, runs } = await drain('slow', 24, 2, 400)
    expect(runs.size).toBe(24)
    expect(asked.length).toBeGreaterThan(10)
    expect(Math.max(...asked), `jobs asked for per claim: ${asked.join(' ')}`).toBeLessThanOrEqual(2)
  }, 90_000)

  it('jobs claimed beyond the slots while slow handlers hold every slot go back to the queue (run not counted), and run once later', async () => {
    // Whether the window holds any job behind the blocking ones depends on the pace at that moment: the scenario runs
    // again, on a queue of its own, until one was given back, and every run checks the rules.
    let givenBack = 0
    for (let attempt = 0; attempt < 5 && givenBack === 0; attempt++) givenBack = await blockedSlots(`mixed-${attempt}`)
    expect(givenBack, 'after-jobs claimed and given back while the slots were blocked').toBeGreaterThan(0)
  }, 120_000)
})

/**
 * 400 fast jobs (the pace opens the window), then four that block all four slots, then 10 more: those the window
 * claimed behind the blocking ones must not stay active while they run, and every job runs once with its run counted
 * once. Returns how many of the 10 were given back while the slots were blocked.
 */
async function blockedSlots(queue: string): Promise<number> {
  await db.pool.query(
    `insert into "${db.schema}".jobs (queue, name, data)
     select $1, 'n', jsonb_build_object('v', case when g <= 400 then 'fast' when g <= 404 then 'block' else 'after' end)
     from generate_series(1, 414) g`,
    [queue],
  )
  const after = new Set(
    (
      await db.pool.query(`select id::text from "${db.schema}".jobs where queue = $1 and data->>'v' = 'after'`, [queue])
    ).rows.map((r) => r.id as string),
  )
  let open!: () => void
  const gate = new Promise<void>((resolve) => (open = resolve))
  let gateOpen = false
  // The 'after' jobs the worker gave back (sql/release-jobs.sql) while every slot was blocked.
  const release = sqlFor('release-jobs', db.schema)
  const givenBack = new Set<string>()
  const pool = recordingPool(db, 8, (text, values) => {
    if (!gateOpen && text === release) {
      for (const id of values?.[0] as string[]) if (after.has(String(id))) givenBack.add(String(id))
    }
  })
  const runs = new Map<string, number>()
  const worker = new Worker<{ v: string }>(
    queue,
    async (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
      if (job.data.v === 'block') await gate
    },
    {
      pool,
      schema: db.schema,
      concurrency: 4,
      batchSize: 100,
      pollIntervalMs: 100,
      maintenanceIntervalMs: 0,
      migrate: false,
    },
  )
  try {
    await worker.run()
    await waitFor(async () => (await count(queue, 'active', 'block')) === 4, 30_000, 'the four blocking jobs to start')
    // The bound is max(50 ms, six round trips); then the release. Wait for the give-back itself, with a bound that a
    // worker which never gives them back does not meet.
    await waitFor(
      async () => (await count(queue, 'active')) === 4,
      15_000,
      'the jobs claimed behind the blocking ones to be given back',
    )
    const samples: number[] = []
    for (let i = 0; i < 16; i++) {
      samples.push(await count(queue, 'active'))
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    expect(samples, 'jobs active while every slot is blocked').toEqual(samples.map(() => 4))
    gateOpen = true
    open()
    await waitFor(async () => (await count(queue, 'completed')) === 414, 30_000, 'every job to complete')
    expect(runs.size).toBe(414)
    expect([...runs.values()].every((n) => n === 1)).toBe(true)
    const { rows } = await db.pool.query(`select max(attempts)::int as n from "${db.schema}".jobs where queue = $1`, [
      queue,
    ])
    expect(rows[0].n).toBe(1)
    return givenBack.size
  } finally {
    gateOpen = true
    open()
    await worker.close()
    await pool.end()
  }
}
