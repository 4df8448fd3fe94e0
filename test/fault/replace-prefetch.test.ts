// Fault suite, replace while the owner runs, with a busy worker under CPU load (a busy-loop process), at concurrency 1
// and 16, with the default and a small batchSize. Guarantee: of three versions added under one dedup key with
// `replace`, only the first (running when the second came) and the last ever run. A worker claims only what it starts:
// with every slot busy it takes nothing more, so the middle one stays 'waiting' (checked in the table while the worker
// polls every 50 ms) until the last replaces it, and never runs.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../../src/index.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'
import { cpuLoad } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

let db: TestSchema
let stopLoad: () => void = () => {}

beforeAll(async () => {
  db = await freshSchema('fault_replace')
  await db.pool.query(`create table "${db.schema}".runs (queue text not null, job_id bigint not null, v int)`)
  stopLoad = cpuLoad(1)
})
afterAll(async () => {
  stopLoad()
  await db?.drop()
})

type Data = { v?: number; blocker?: boolean }

describe.each([
  { concurrency: 1, batchSize: undefined },
  { concurrency: 1, batchSize: 2 },
  { concurrency: 16, batchSize: undefined },
  { concurrency: 16, batchSize: 2 },
])('replace while the owner runs: concurrency $concurrency, batchSize $batchSize', ({ concurrency, batchSize }) => {
  it('only the first and the last version ever run; the middle one, never handed to a handler, stays waiting and is superseded', async () => {
    const name = `replace-${concurrency}-${batchSize ?? 'default'}`
    const queue = new Queue<Data>(name, { connectionString: db.url, schema: db.schema, migrate: false })
    let open!: () => void
    const gate = new Promise<void>((r) => (open = r))
    let running = 0
    const ran: number[] = []
    const errors: Error[] = []
    const worker = new Worker<Data>(
      name,
      async (job) => {
        running++
        await db.pool.query(`insert into "${db.schema}".runs (queue, job_id, v) values ($1, $2, $3)`, [
          name,
          job.id,
          job.data.v ?? null,
        ])
        if (job.data.v !== undefined) ran.push(job.data.v)
        if (job.data.blocker || job.data.v === 1) await gate
        running--
      },
      {
        connectionString: db.url,
        schema: db.schema,
        concurrency,
        ...(batchSize === undefined ? {} : { batchSize }),
        pollIntervalMs: 50,
        maintenanceIntervalMs: 0,
        migrate: false,
      },
    )
    worker.on('error', (err) => errors.push(err))
    const replace = (v: number) => queue.add('v', { v }, { deduplication: { id: 'k', replace: true } })
    try {
      const v1 = await replace(1)
      expect(v1.outcome).toBe('added')
      if (concurrency > 1)
        await queue.addBulk(Array.from({ length: concurrency - 1 }, () => ({ name: 'b', data: { blocker: true } })))
      await waitFor(() => running === concurrency, 20_000, `all ${concurrency} slots to be busy`)

      const v2 = await replace(2)
      expect(v2).toMatchObject({ outcome: 'replaced', deduplicated: false })
      // The busy worker is woken by v2's add and by its poll (every 50 ms) and claims nothing: v2 stays waiting, no lease.
      const samples: unknown[] = []
      for (let i = 0; i < 12; i++) {
        const { rows } = await db.pool.query<{ state: string; locked_by: string | null; attempts: number }>(
          `select state, locked_by, attempts from "${db.schema}".jobs where id = $1`,
          [v2.id],
        )
        samples.push(rows[0])
        await new Promise((r) => setTimeout(r, 50))
      }
      expect(samples).toEqual(samples.map(() => ({ state: 'waiting', locked_by: null, attempts: 0 })))
      expect(running).toBe(concurrency)

      const v3 = await replace(3)
      expect(v3).toMatchObject({ outcome: 'replaced', deduplicated: false })
      const { rows: gone } = await db.pool.query(`select 1 from "${db.schema}".jobs where id = $1`, [v2.id])
      expect(gone).toEqual([])
      expect(await queue.getDeduplicationJobId('k')).toBe(v3.id)

      open()
      await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            `select count(*)::int as n from "${db.schema}".jobs where queue = $1 and state = 'completed'`,
            [name],
          )
          return rows[0]!.n === concurrency + 1
        },
        20_000,
        'v1, v3 and the blockers to complete',
      )
      await new Promise((r) => setTimeout(r, 200)) // a late start of v2 would show by now

      expect(ran.sort()).toEqual([1, 3])
      const { rows: runs } = await db.pool.query<{ v: number }>(
        `select v from "${db.schema}".runs where queue = $1 and v is not null order by v`,
        [name],
      )
      expect(runs.map((r) => r.v)).toEqual([1, 3])
      const { rows: states } = await db.pool.query<{ id: string; state: string; attempts: number }>(
        `select j.id::text, j.state, j.attempts from "${db.schema}".jobs j where j.id = any($1) order by j.id`,
        [[v1.id, v3.id]],
      )
      expect(states).toEqual([
        { id: v1.id, state: 'completed', attempts: 1 },
        { id: v3.id, state: 'completed', attempts: 1 },
      ])
      expect(errors).toEqual([])
    } finally {
      open()
      await worker.close()
      await queue.close()
    }
  }, 60_000)
})
