// Two ctx.effect calls in one handler each happen exactly once (charge, then receipt); the job completes only after the
// handler returns; job.result is what the 'completed' event reports; misuse throws at the call, before any write.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_effects_result')
  await db.pool.query(`create table "${db.schema}".side_effects (job_id bigint, what text, run int)`)
})
afterAll(async () => {
  await db.drop()
})

const opts = () => ({
  connectionString: db.url,
  schema: db.schema,
  maintenanceIntervalMs: 0,
  migrate: false,
  pollIntervalMs: 200,
})

describe('ctx.effect, many per job', () => {
  it('charge then receipt: both once; a run that dies after the first reruns, skips it and sends the receipt', async () => {
    const q = new Queue<{ order: number }>('two-effects', {
      connectionString: db.url,
      schema: db.schema,
      migrate: false,
    })
    const seen: { attempt: number; charge: string; receipt: string }[] = []
    const worker = new Worker<{ order: number }, string>(
      'two-effects',
      async (job, ctx) => {
        const insert = (what: string) => async (tx: import('pg').PoolClient) => {
          await tx.query(`insert into "${db.schema}".side_effects values ($1, $2, $3)`, [job.id, what, job.attempts])
        }
        const charge = await ctx.effect(`charge:${job.data.order}`, insert('charge'))
        // The first run dies between the two effects; the job must not be completed by the first effect.
        if (job.attempts === 1) throw new Error('crashed after charging')
        const receipt = await ctx.effect(`receipt:${job.data.order}`, insert('receipt'))
        seen.push({ attempt: job.attempts, charge, receipt })
        return `${charge}/${receipt}`
      },
      opts(),
    )
    try {
      const job = await q.add('order', { order: 7 }, { attempts: 2 })
      const done = await waitForState(db, job.id, 'completed')
      expect(done.result).toBe('duplicate-done/ran')
      expect(seen).toEqual([{ attempt: 2, charge: 'duplicate-done', receipt: 'ran' }])
      const { rows } = await db.pool.query(
        `select what, run from "${db.schema}".side_effects where job_id = $1 order by what`,
        [job.id],
      )
      expect(rows).toEqual([
        { what: 'charge', run: 1 },
        { what: 'receipt', run: 2 },
      ])
      // A replay days later (retryJob after a failure) applies nothing twice.
      await db.pool.query(`update "${db.schema}".jobs set state = 'failed' where id = $1`, [job.id])
      await q.retryJob(job.id)
      const again = await waitForState(db, job.id, 'completed')
      expect(again.result).toBe('duplicate-done/duplicate-done')
      const { rows: after } = await db.pool.query(
        `select count(*)::int as n from "${db.schema}".side_effects where job_id = $1`,
        [job.id],
      )
      expect(after[0].n).toBe(2)
    } finally {
      await worker.close()
      await q.close()
    }
  })

  it('ctx.effect after ctx.transaction completed the job throws at the call and writes nothing', async () => {
    const q = new Queue('effect-after-tx', { connectionString: db.url, schema: db.schema, migrate: false })
    let misuse: unknown
    const worker = new Worker(
      'effect-after-tx',
      async (job, ctx) => {
        await ctx.transaction(async (tx) => {
          await tx.query(`insert into "${db.schema}".side_effects values ($1, 'in-tx', 1)`, [job.id])
          return 'tx'
        })
        misuse = await ctx
          .effect('late', async (tx) => {
            await tx.query(`insert into "${db.schema}".side_effects values ($1, 'late', 1)`, [job.id])
          })
          .catch((e: unknown) => e)
      },
      opts(),
    )
    try {
      const job = await q.add('j', {})
      await waitForState(db, job.id, 'completed')
      await waitFor(() => misuse !== undefined, 5_000, 'the misuse to be reported')
      expect(String((misuse as Error).message)).toContain('after ctx.transaction completed job')
      const { rows } = await db.pool.query(`select what from "${db.schema}".side_effects where job_id = $1`, [job.id])
      expect(rows).toEqual([{ what: 'in-tx' }])
      const { rows: ledger } = await db.pool.query(
        `select count(*)::int as n from "${db.schema}".processed_effects where effect_key = 'late'`,
      )
      expect(ledger[0].n).toBe(0)
    } finally {
      await worker.close()
      await q.close()
    }
  })
})

describe('ctx.effect input and ctx.logger', () => {
  it('a bad key or fn is a ValidationError naming it, before any statement; ctx.logger lines carry the run', async () => {
    const q = new Queue('effect-input', { connectionString: db.url, schema: db.schema, migrate: false })
    const lines: Record<string, unknown>[] = []
    const capture = (bindings: Record<string, unknown>) => {
      const log = (obj: object | string, msg?: string) =>
        void lines.push({ ...bindings, ...(typeof obj === 'object' ? obj : {}), msg: msg ?? obj })
      const logger = {
        debug: log,
        info: log,
        warn: log,
        error: log,
        child: (b: Record<string, unknown>) => capture({ ...bindings, ...b }),
      }
      return logger
    }
    const errors: unknown[] = []
    const worker = new Worker(
      'effect-input',
      async (job, ctx) => {
        for (const [key, fn] of [
          ['', async () => {}],
          ['x'.repeat(256), async () => {}],
          ['ok', 42],
        ] as const) {
          errors.push(await ctx.effect(key, fn as never).catch((e: unknown) => e))
        }
        ctx.logger.info({ step: 'done' }, 'handler says hi')
      },
      { ...opts(), logger: capture({}) },
    )
    try {
      const job = await q.add('j', {})
      await waitForState(db, job.id, 'completed')
      expect(errors.map((e) => [(e as { name: string }).name, (e as { field: string }).field])).toEqual([
        ['ValidationError', 'key'],
        ['ValidationError', 'key'],
        ['ValidationError', 'fn'],
      ])
      const { rows } = await db.pool.query(
        `select count(*)::int as n from "${db.schema}".processed_effects
        where effect_key = any($1)`,
        [['', 'x'.repeat(256), 'ok']],
      )
      expect(rows[0].n).toBe(0)
      expect(lines.find((l) => l.msg === 'handler says hi')).toMatchObject({
        queue: 'effect-input',
        worker: worker.id,
        jobId: job.id,
        jobName: 'j',
        attempt: 1,
        step: 'done',
      })
    } finally {
      await worker.close()
      await q.close()
    }
  })
})

describe('job.result', () => {
  it("is the handler's return value (or ctx.transaction's), the same the 'completed' event reports", async () => {
    const q = new Queue<{ kind: string }>('results', { connectionString: db.url, schema: db.schema, migrate: false })
    const events = new Map<string, unknown>()
    const worker = new Worker<{ kind: string }, unknown>(
      'results',
      async (job, ctx) => {
        if (job.data.kind === 'plain') return { sent: 3 }
        if (job.data.kind === 'effect') {
          await ctx.effect(`e:${job.id}`, async () => {})
          return 'after-effect'
        }
        return ctx.transaction(async () => ({ in: 'transaction' }))
      },
      opts(),
    )
    worker.on('completed', (job, result) => events.set(job.id, result))
    try {
      const jobs = await q.addBulk(['plain', 'effect', 'transaction'].map((kind) => ({ name: kind, data: { kind } })))
      for (const j of jobs) await waitForState(db, j.id, 'completed')
      await waitFor(() => events.size === 3, 5_000, "three 'completed' events")
      for (const j of jobs) {
        const stored = await q.getJob(j.id)
        expect(stored?.result).toEqual(events.get(j.id))
      }
      expect((await q.getJob(jobs[0]!.id))?.result).toEqual({ sent: 3 })
      expect((await q.getJob(jobs[1]!.id))?.result).toBe('after-effect')
      expect((await q.getJob(jobs[2]!.id))?.result).toEqual({ in: 'transaction' })
      expect((await storedJob(db, jobs[0]!.id)).started_at).not.toBeNull()
    } finally {
      await worker.close()
      await q.close()
    }
  })
})
