// Effects inside workers: a SIGKILL between the effect and the job's acknowledgement, replays days later, and ctx.runOnce's duplicate-running never counting as success.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, Queue, Worker, type WorkerOptions } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { claimRow, deferred } from './helpers/effects-support.js'
import { exited, spawnFixture } from './helpers/processes.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema
let queue: Queue<{ invoice: number }>

beforeAll(async () => {
  db = await freshSchema('effects_worker')
  await db.pool.query(
    `create table "${db.schema}".charges (id bigserial primary key, invoice int not null, job_id bigint not null, pid int not null)`,
  )
  await db.pool.query(
    `create table "${db.schema}".progress (job_id bigint not null, pid int not null, step text not null)`,
  )
  queue = new Queue('billing', { connectionString: db.url, schema: db.schema, migrate: false })
})

afterAll(async () => {
  await queue.close()
  await db.drop()
})

async function charges(invoice: number): Promise<{ job_id: string; pid: number }[]> {
  const { rows } = await db.pool.query<{ job_id: string; pid: number }>(
    `select job_id, pid from "${db.schema}".charges where invoice = $1 order by id`,
    [invoice],
  )
  return rows
}

async function ledgerKeys(prefix: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ effect_key: string }>(
    `select effect_key from "${db.schema}".processed_effects where effect_key like $1 || '%' order by effect_key`,
    [prefix],
  )
  return rows.map((r) => r.effect_key)
}

const workerOpts = (extra: Partial<WorkerOptions> = {}): WorkerOptions => ({
  connectionString: db.url,
  schema: db.schema,
  pollIntervalMs: 200,
  maintenanceIntervalMs: 200,
  migrate: false,
  ...extra,
})

describe('a worker killed with SIGKILL between the effect and the acknowledgement', () => {
  async function crashThenRecover(mode: 'ledger' | 'ctx-effect', invoice: number, step: string) {
    const job = await queue.add('charge', { invoice }, { attempts: 3 })
    const env = { PGONCE_URL: db.url, PGONCE_SCHEMA: db.schema, QUEUE: 'billing', MODE: mode, LEASE_MS: '1500' }
    const first = spawnFixture('effects-worker-child.ts', { ...env, MAINTENANCE_MS: '0' })
    let second: ReturnType<typeof spawnFixture> | undefined
    try {
      const { pid } = await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ pid: number }>(
            `select pid from "${db.schema}".progress where job_id = $1 and step = $2`,
            [job.id, step],
          )
          return rows[0]
        },
        60_000,
        `the first worker to reach '${step}'`,
      )
      expect(pid).toBe(first.pid)
      expect(await storedJob(db, job.id)).toMatchObject({ state: 'active', attempts: 1 })
      first.kill('SIGKILL')
      expect(await exited(first)).toBe('SIGKILL')
      // A second process rescues the job once the dead worker's lease has expired, and runs it again.
      second = spawnFixture('effects-worker-child.ts', env)
      const done = await waitForState(db, job.id, 'completed', 60_000)
      expect(done.attempts).toBe(2)
      return { job, done, first: first.pid as number, second: second.pid as number }
    } finally {
      first.kill('SIGKILL')
      if (second) {
        second.kill('SIGTERM')
        await exited(second)
      }
    }
  }

  it("ledger committed with the effect in the handler's transaction: the rerun skips the charge (without the ledger it would charge twice)", async () => {
    const { done, first } = await crashThenRecover('ledger', 101, 'effect-committed')
    expect(done.result).toBe('charged')
    expect((await charges(101)).map((c) => c.pid)).toEqual([first])
    expect(await ledgerKeys('charge:invoice-101')).toEqual(['charge:invoice-101'])
  }, 120_000)

  it('ctx.effect killed before its commit: neither the ledger row nor the charge survive, and the rerun charges exactly once', async () => {
    const { done, second } = await crashThenRecover('ctx-effect', 102, 'effect-written')
    expect(done.result).toBe('ran')
    expect((await charges(102)).map((c) => c.pid)).toEqual([second])
    expect(await ledgerKeys('charge:invoice-102')).toEqual(['charge:invoice-102'])
  }, 120_000)
})

describe('a replay days later does not repeat a recorded effect', () => {
  it('a failed job retried by hand (queue.retryJob) skips the charge it recorded before failing', async () => {
    const effects = new Effects({ connectionString: db.url, schema: db.schema, migrate: false })
    const q = new Queue<{ invoice: number }>('replay-failed', {
      connectionString: db.url,
      schema: db.schema,
      migrate: false,
    })
    const job = await q.add('charge', { invoice: 201 }, { attempts: 1 })
    const decisions: boolean[] = []
    const worker = new Worker<{ invoice: number }>(
      'replay-failed',
      async (j) => {
        const client = await db.pool.connect()
        try {
          await client.query('begin')
          const first = await effects.record(client, `charge:invoice-${j.data.invoice}`)
          decisions.push(first)
          if (first)
            await client.query(`insert into "${db.schema}".charges (invoice, job_id, pid) values ($1, $2, 0)`, [
              j.data.invoice,
              j.id,
            ])
          await client.query('commit')
        } finally {
          client.release()
        }
        if (decisions.length === 1) throw new Error('receipt mail failed')
        return 'receipt sent'
      },
      workerOpts(),
    )
    try {
      const failed = await waitForState(db, job.id, 'failed')
      expect(failed.last_error).toBe('receipt mail failed')
      // Three days pass in the dead-letter set.
      await db.pool.query(
        `update "${db.schema}".processed_effects set recorded_at = recorded_at - interval '3 days' where effect_key = $1`,
        ['charge:invoice-201'],
      )
      await db.pool.query(
        `update "${db.schema}".jobs set finished_at = finished_at - interval '3 days' where id = $1`,
        [job.id],
      )
      await q.retryJob(job.id)
      const done = await waitForState(db, job.id, 'completed')
      expect(done.result).toBe('receipt sent')
      expect(decisions).toEqual([true, false])
      expect(await charges(201)).toHaveLength(1)
    } finally {
      await worker.close()
      await q.close()
      await effects.close()
    }
  })

  it('a job re-added after its TTL key expired runs, but ctx.effect skips the effect already recorded', async () => {
    const q = new Queue<{ invoice: number }>('replay-ttl', {
      connectionString: db.url,
      schema: db.schema,
      migrate: false,
    })
    const outcomes: string[] = []
    const worker = new Worker<{ invoice: number }>(
      'replay-ttl',
      async (j, ctx) => {
        const outcome = await ctx.effect(`charge:invoice-${j.data.invoice}`, async (tx) => {
          await tx.query(`insert into "${db.schema}".charges (invoice, job_id, pid) values ($1, $2, 0)`, [
            j.data.invoice,
            j.id,
          ])
        })
        outcomes.push(outcome)
        return outcome
      },
      workerOpts(),
    )
    try {
      const dedup = { id: 'invoice-202', ttl: 86_400_000 }
      const original = await q.add('charge', { invoice: 202 }, { deduplication: dedup })
      expect(original.outcome).toBe('added')
      await waitForState(db, original.id, 'completed')
      // Inside the 24-hour window the key answers.
      const again = await q.add('charge', { invoice: 202 }, { deduplication: dedup })
      expect([again.outcome, again.id]).toEqual(['duplicate-key', original.id])
      // Three days later the key has expired: the add goes through and the job runs...
      const { rowCount } = await db.pool.query(
        `update "${db.schema}".dedup_keys set expires_at = now() - interval '2 days' where queue = 'replay-ttl' and key = $1`,
        [dedup.id],
      )
      expect(rowCount).toBe(1)
      const replay = await q.add('charge', { invoice: 202 }, { deduplication: dedup })
      expect(replay.outcome).toBe('added')
      expect(replay.id).not.toBe(original.id)
      const done = await waitForState(db, replay.id, 'completed')
      // ...but the ledger remembers the charge.
      expect(done.result).toBe('duplicate-done')
      expect(outcomes).toEqual(['ran', 'duplicate-done'])
      expect((await charges(202)).map((c) => c.job_id)).toEqual([original.id])
    } finally {
      await worker.close()
      await q.close()
    }
  })
})

describe('ctx.runOnce answered duplicate-running', () => {
  it('retries the job later instead of completing it; when the other holder fails, the job runs the work itself', async () => {
    const other = new Effects({ connectionString: db.url, schema: db.schema, migrate: false })
    const q = new Queue<{ invoice: number }>('run-once', {
      connectionString: db.url,
      schema: db.schema,
      migrate: false,
    })
    const key = 'notify:invoice-301'
    const holderIn = deferred()
    const holderFail = deferred()
    const holder = other.runOnce(key, async () => {
      holderIn.resolve()
      await holderFail.promise
      throw new Error('push gateway down')
    })
    await holderIn.promise
    const ran: string[] = []
    const worker = new Worker<{ invoice: number }>(
      'run-once',
      async (j, ctx) => {
        return ctx.runOnce(key, () => {
          ran.push(j.id)
        })
      },
      workerOpts({ retryLaterMs: 300 }),
    )
    try {
      const job = await q.add('notify', { invoice: 301 }, { attempts: 1 })
      const rescheduled = await waitForState(db, job.id, 'delayed')
      expect(rescheduled).toMatchObject({ attempts: 0, result: null })
      expect(ran).toEqual([])
      holderFail.resolve()
      await expect(holder).rejects.toThrow('push gateway down')
      // Had duplicate-running counted as success, nobody would ever send it.
      const done = await waitForState(db, job.id, 'completed')
      expect(done).toMatchObject({ attempts: 1, result: 'ran' })
      expect(ran).toEqual([job.id])
      expect(await claimRow(db.pool, db.schema, key)).toMatchObject({ state: 'done', token: null })
    } finally {
      await worker.close()
      await q.close()
      await other.close()
    }
  })

  it('a claim left by a crashed holder keeps the job retrying until it expires, then the job takes it over and runs', async () => {
    const q = new Queue<{ invoice: number }>('run-once-crash', {
      connectionString: db.url,
      schema: db.schema,
      migrate: false,
    })
    const key = 'notify:invoice-302'
    await db.pool.query(
      `insert into "${db.schema}".execution_claims (key, state, token, expires_at)
       values ($1, 'running', gen_random_uuid(), now() + interval '1 hour')`,
      [key],
    )
    const ran: string[] = []
    let tries = 0
    const worker = new Worker<{ invoice: number }>(
      'run-once-crash',
      async (j, ctx) => {
        tries++
        return ctx.runOnce(key, () => {
          ran.push(j.id)
        })
      },
      workerOpts({ retryLaterMs: 200 }),
    )
    try {
      const job = await q.add('notify', { invoice: 302 }, { attempts: 1 })
      expect(await waitForState(db, job.id, 'delayed')).toMatchObject({ attempts: 0 })
      expect(ran).toEqual([])
      // The dead holder's claim runs out (as if the hour had passed).
      await db.pool.query(
        `update "${db.schema}".execution_claims set expires_at = now() - interval '1 second' where key = $1`,
        [key],
      )
      const done = await waitForState(db, job.id, 'completed', 60_000)
      expect(done).toMatchObject({ attempts: 1, result: 'ran' })
      expect(tries).toBeGreaterThan(1)
      expect(ran).toEqual([job.id])
    } finally {
      await worker.close()
      await q.close()
    }
  })
})
