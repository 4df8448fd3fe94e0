// Paced housekeeping (a Worker's): after each full batch it pauses `pace` (3) times as long as the batch took; meanwhile
// other runners of the schema leave the work to it; a Worker's close, or runMaintenance's signal, stops a round before
// its next batch.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ValidationError, Worker, runMaintenance } from '../../src/index.js'
import { housekeepingRound } from '../../src/maintenance.js'
import { silentLogger } from '../../src/logger.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'
import { waitFor } from '../helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('pace')
  await db.pool.query(`insert into "${db.schema}".queue_settings (queue, completed_retention_ms)
    select 'pace-' || q, 0 from generate_series(0, 2) q`)
})
afterAll(async () => {
  await db.drop()
})

/** Inserts `rows` completed jobs over `queues` queues (pace-0 …), all past their retention of 0 ms. */
async function history(rows: number, queues = 1): Promise<void> {
  await db.pool.query(
    `insert into "${db.schema}".jobs (queue, name, data, state, attempts, finished_at)
     select 'pace-' || (g % $2), 'done', '{}', 'completed', 1, now() - interval '1 minute' from generate_series(1, $1::int) g`,
    [rows, queues],
  )
}

const left = async (): Promise<number> =>
  (await db.pool.query<{ n: number }>(`select count(*)::int as n from "${db.schema}".jobs`)).rows[0]!.n

const paceRow = async (): Promise<{ runner: string; live: boolean } | undefined> =>
  (
    await db.pool.query<{ runner: string; live: boolean }>(
      `select runner, paused_until > clock_timestamp() as live from "${db.schema}".housekeeping_pace`,
    )
  ).rows[0]

describe('paced housekeeping', () => {
  it('a paced round pauses after each full batch for pace times its duration: at pace 10 the same work takes over 4x as long', async () => {
    // Pace 10 rather than the Worker's 3, so that a loaded machine (the suite runs files in parallel) cannot blur a
    // ~10x difference into the threshold; 2.5x at pace 3 failed once that way.
    const pool = new pg.Pool({ connectionString: db.url, max: 1 })
    try {
      await history(8_000)
      let t = performance.now()
      expect(await housekeepingRound(pool, db.schema, silentLogger, { batchSize: 500 })).toMatchObject({
        pruned: 8_000,
      })
      const fullSpeed = performance.now() - t
      await history(8_000)
      t = performance.now()
      expect(await housekeepingRound(pool, db.schema, silentLogger, { batchSize: 500, pace: 10 })).toMatchObject({
        pruned: 8_000,
      })
      const paced = performance.now() - t
      expect(paced).toBeGreaterThan(4 * fullSpeed)
      expect(await paceRow()).toBeUndefined() // the round ended its pause
    } finally {
      await pool.end()
    }
  })

  it('while a paced runner pauses, other rounds stop at their first batch; its abort ends the pause at once', async () => {
    await history(20_000)
    const pool = new pg.Pool({ connectionString: db.url, max: 1 })
    const stop = new AbortController()
    try {
      const paced = housekeepingRound(pool, db.schema, silentLogger, { batchSize: 1000, pace: 50, signal: stop.signal })
      await waitFor(async () => (await paceRow())?.live === true, 5_000, 'the paced runner to pause')
      const other = await runMaintenance({ pool: db.pool, schema: db.schema })
      expect(other).toMatchObject({ ran: false, pruned: 0 })

      const t = performance.now()
      stop.abort()
      const result = await paced
      expect(performance.now() - t).toBeLessThan(500)
      expect(result.pruned).toBeGreaterThanOrEqual(1000)
      expect(result.pruned).toBeLessThan(20_000)
      expect(await paceRow()).toBeUndefined()
      expect(await runMaintenance({ pool: db.pool, schema: db.schema })).toMatchObject({
        ran: true,
        pruned: 20_000 - result.pruned,
      })
    } finally {
      await pool.end()
    }
  })

  it('runMaintenance stops before its next batch when its signal aborts, and returns what it did', async () => {
    await history(50_000)
    const stop = new AbortController()
    const round = runMaintenance({ pool: db.pool, schema: db.schema, signal: stop.signal })
    await waitFor(async () => (await left()) < 50_000, 5_000, 'the first batch')
    stop.abort()
    const result = await round
    expect(result.ran).toBe(true)
    expect(result.pruned).toBeGreaterThanOrEqual(1000)
    expect(result.pruned).toBeLessThan(50_000)
    expect(await left()).toBe(50_000 - result.pruned)
    // an aborted signal: nothing runs
    expect(await runMaintenance({ pool: db.pool, schema: db.schema, signal: stop.signal })).toMatchObject({
      ran: false,
      pruned: 0,
    })
    expect(await runMaintenance({ pool: db.pool, schema: db.schema })).toMatchObject({ pruned: 50_000 - result.pruned })
  })

  it('runMaintenance refuses a signal that is not an AbortSignal, before any I/O', async () => {
    const call = runMaintenance({
      connectionString: 'postgres://nobody@127.0.0.1:1/none',
      signal: 'stop' as unknown as AbortSignal,
    })
    await expect(call).rejects.toBeInstanceOf(ValidationError)
    await expect(call).rejects.toMatchObject({ code: 'INVALID_TYPE', field: 'options.signal' })
  })

  it("a Worker's close stops its housekeeping between batches instead of waiting for the round", async () => {
    await history(150_000, 3)
    const worker = new Worker('pace-idle', async () => {}, {
      connectionString: db.url,
      schema: db.schema,
      migrate: false,
    })
    const errors: Error[] = []
    worker.on('error', (err) => errors.push(err))
    await worker.run()
    await waitFor(async () => (await left()) < 150_000, 10_000, "the worker's housekeeping to start")
    const t = performance.now()
    await worker.close()
    // At full speed and without the stop, the round's 150 batches took 2.5-5 s here.
    expect(performance.now() - t).toBeLessThan(1500)
    const remaining = await left()
    expect(remaining).toBeLessThan(150_000)
    expect(remaining).toBeGreaterThan(50_000)
    expect(await paceRow()).toBeUndefined()
    expect(errors).toEqual([])
  })
})
