// The start window (src/worker/job-runner.ts): a worker whose handlers finish faster than a start round trip starts
// claimed-ahead jobs beyond its free slots, so that a freed slot does not idle while a start is in flight; a worker
// with slow handlers starts no job before a slot is free for it (a claimed-ahead job stays pending: a replace, a cancel
// or an idle worker can still take it).

import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Worker } from '../src/index.js'
import { PACKAGE_ROOT } from '../src/db/sql-files.js'
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

/** The first line of sql/start-jobs.sql, by which the recording pool tells a start from other statements. */
const START_HEADER = readFileSync(join(PACKAGE_ROOT, 'sql', 'start-jobs.sql'), 'utf8').split('\n')[0] as string

/** Claims before a drain's pace is known and its window open. */
const WARM_UP = 10

/** Drains `total` queued jobs of `queue`; returns how many jobs each statement made active, and each job's runs. */
async function drain(queue: string, total: number, concurrency: number, handlerMs: number, batchSize = 100) {
  await db.pool.query(
    `insert into "${db.schema}".jobs (queue, name, data) select $1, 'n', '{}' from generate_series(1, $2)`, [queue, total])
  // Jobs made active per statement: a claim's third parameter (how many it starts), a start's first (the ids).
  const started: number[] = []
  // Jobs made active by start statements once the pace is known (after the first WARM_UP claims).
  let byStarts = 0
  let claims = 0
  const pool = recordingPool(db, 8, (text, values) => {
    if (text.startsWith('-- Claims up to')) {
      started.push(Number(values?.[2]))
      claims++
    } else if (text.startsWith(START_HEADER)) {
      started.push((values?.[0] as unknown[]).length)
      if (claims > WARM_UP) byStarts += (values?.[0] as unknown[]).length
    }
  })
  const runs = new Map<string, number>()
  const worker = new Worker(queue, async (job) => {
    runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
    if (handlerMs > 0) await new Promise((resolve) => setTimeout(resolve, handlerMs))
  }, { pool, schema: db.schema, concurrency, batchSize, pollIntervalMs: 60_000, maintenanceIntervalMs: 0, migrate: false })
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
  return { started, runs, byStarts }
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

  it('fast handlers keeping pace: the claims start nearly every job they take, few wait for a start of their own', async () => {
    // The window counts the slower of a start's and a claim's round trip: the next jobs come with a claim, and a window
    // of the (shorter) start round trips left the claimed jobs beyond it to separate starts: 5-43% of the jobs after
    // the warm-up in most 10,000-job drains (per drain, in three runs: 1640 2295 1639 0, 501 4260 2146 3568, 3038
    // 95 0 2915). Four drains, their median held to the bound: one drain may meet a busy machine (666 of 10,000 once,
    // under the full suite), the old rule's medians were 1,505-2,857.
    const total = 10_000
    const left: number[] = []
    for (let i = 0; i < 4; i++) {
      const { runs, byStarts } = await drain(`busy-${i}`, total, 16, 0, 500)
      expect(runs.size).toBe(total)
      left.push(byStarts)
    }
    const sorted = [...left].sort((x, y) => x - y)
    const median = ((sorted[1] as number) + (sorted[2] as number)) / 2
    expect(median, `jobs started by start statements after the warm-up, per drain: ${left.join(' ')}`)
      .toBeLessThan(total * 0.05)
  }, 120_000)

  it('slow handlers: no statement starts more jobs than there are slots (claimed-ahead jobs stay pending)', async () => {
    // 400 ms handlers, 2 slots: 0.005 jobs finish per ms, so the window (what they finish in three round trips) stays
    // below one job unless a round trip takes 67 ms. With 100 ms handlers a round trip of 17 ms opened it, which the
    // full suite's load on two cores reached now and then (one statement started 5).
    const { started, runs } = await drain('slow', 24, 2, 400)
    expect(runs.size).toBe(24)
    expect(started.length).toBeGreaterThan(10)
    expect(Math.max(...started), `jobs started per statement: ${started.join(' ')}`).toBeLessThanOrEqual(2)
  }, 90_000)

  it('jobs started ahead while slow handlers hold every slot go back to the queue (run not counted), and run once later', async () => {
    // Whether any job is started ahead behind the blocking ones depends on the pace at that moment (about 1 run in 20
    // starts none): the scenario runs again, on a queue of its own, until one was, and every run checks the rules.
    let givenBack = 0
    for (let attempt = 0; attempt < 5 && givenBack === 0; attempt++) givenBack = await blockedSlots(`mixed-${attempt}`)
    expect(givenBack, 'after-jobs started ahead and given back while the slots were blocked').toBeGreaterThan(0)
  }, 120_000)
})

/**
 * 400 fast jobs (the pace opens the window), then four that block all four slots, then 10 more: those the window
 * started behind the blocking ones must not stay active while they run, and every job runs once with its run counted
 * once. Four slots, not one: with one, a pace of about one job per start round trip opened the window in only about
 * half the runs (floor(rate × round trip)). Returns how many of the 10 were given back while the slots were blocked.
 */
async function blockedSlots(queue: string): Promise<number> {
  await db.pool.query(
    `insert into "${db.schema}".jobs (queue, name, data)
     select $1, 'n', jsonb_build_object('v', case when g <= 400 then 'fast' when g <= 404 then 'block' else 'after' end)
     from generate_series(1, 414) g`, [queue])
  const after = new Set((await db.pool.query(
    `select id::text from "${db.schema}".jobs where queue = $1 and data->>'v' = 'after'`, [queue])).rows.map((r) => r.id as string))
  let open!: () => void
  const gate = new Promise<void>((resolve) => (open = resolve))
  let gateOpen = false
  // The 'after' jobs the worker gave back (sql/release-jobs.sql) while every slot was blocked.
  const givenBack = new Set<string>()
  const pool = recordingPool(db, 8, (text, values) => {
    if (!gateOpen && text.startsWith('-- Gives back')) {
      for (const id of values?.[0] as string[]) if (after.has(String(id))) givenBack.add(String(id))
    }
  })
  const runs = new Map<string, number>()
  const worker = new Worker<{ v: string }>(queue, async (job) => {
    runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
    if (job.data.v === 'block') await gate
  }, { pool, schema: db.schema, concurrency: 4, batchSize: 100, pollIntervalMs: 100, maintenanceIntervalMs: 0, migrate: false })
  const count = async (state: string, v?: string): Promise<number> => (await db.pool.query(
    `select count(*)::int as n from "${db.schema}".jobs where queue = $1 and state = $2 and ($3::text is null or data->>'v' = $3)`,
    [queue, state, v ?? null])).rows[0].n
  try {
    await worker.run()
    await waitFor(async () => await count('active', 'block') === 4, 30_000, 'the four blocking jobs to start')
    // The bound is max(50 ms, six round trips); then the release, and the pace settling. On a loaded machine six round
    // trips outlast the 600 ms: under the full suite 57 jobs were still active 800 ms after the blocking ones started
    // (fast jobs given back earlier and started ahead again behind them), beside a drain on both cores three. So wait
    // for the give-back itself, with a bound that a worker which never gives them back does not meet. (Not for the
    // fast jobs' completions: a fast job given back waits behind the blocking ones until the gate opens.)
    await new Promise((resolve) => setTimeout(resolve, 600))
    await waitFor(async () => await count('active') === 4, 15_000, 'the jobs started ahead behind the blocking ones to be given back')
    const samples: number[] = []
    for (let i = 0; i < 16; i++) {
      samples.push(await count('active'))
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    expect(samples, 'jobs active while every slot is blocked').toEqual(samples.map(() => 4))
    gateOpen = true
    open()
    await waitFor(async () => await count('completed') === 414, 30_000, 'every job to complete')
    expect(runs.size).toBe(414)
    expect([...runs.values()].every((n) => n === 1)).toBe(true)
    const { rows } = await db.pool.query(`select max(attempts)::int as n from "${db.schema}".jobs where queue = $1`, [queue])
    expect(rows[0].n).toBe(1)
    return givenBack.size
  } finally {
    gateOpen = true
    open()
    await worker.close()
    await pool.end()
  }
}
