// The jobs the dashboard's browser test and its screenshots (dev/dashboard-screenshots.ts) show, made by the public
// API in a migrated schema: a worker completes and fails orders, a key is held, effects and a runOnce claim are
// recorded, a scheduler ticks daily, a job is delayed, another waits on a parent, and a paused queue.

import pg from 'pg'
import { Queue, Worker } from '../../src/index.js'
import { waitFor } from './wait.js'

export interface DashboardUiSeed {
  /** Completed orders (each recorded the effect `charge:<order>` and ran `receipt:<order>` once). */
  completed: string[]
  /** Failed orders: two `card declined: insufficient funds`, one `payment gateway timed out`. */
  failed: string[]
  /** The waiting email holding the key `welcome:ann` until it finishes (no TTL), data `{ to: 'ann@example.com' }`. */
  keyOwner: string
  /** The waiting email holding `digest:bob` for an hour (a TTL). */
  ttlOwner: string
  /** An email delayed by an hour. */
  delayed: string
  /** `render` (waiting) and the `send` that depends on it (waiting-children). */
  parent: string
  child: string
  /** A job of the paused queue `reports`. */
  pausedJob: string
}

type Order = { order: number; customer: string; fail?: string }

/** The error a payment provider's client would throw, with a short stack that reads the same on every machine. */
function declined(message: string): Error {
  const error = new Error(message)
  error.stack = `Error: ${message}\n    at chargeCard (billing/payments.ts:42:11)\n    at handleOrder (workers/orders.ts:18:5)`
  return error
}

/** Seeds `schema` (already migrated) through `connectionString`; every queue and worker it opens is closed. */
export async function seedDashboardUi(connectionString: string, schema: string): Promise<DashboardUiSeed> {
  const options = { connectionString, schema, migrate: false }
  const orders = new Queue<Order>('orders', options)
  const emails = new Queue<Record<string, unknown>>('emails', options)
  const reports = new Queue<Record<string, unknown>>('reports', options)
  const pool = new pg.Pool({ connectionString, max: 1 })
  const worker = new Worker<Order, { charged: number }>(
    'orders',
    async (job, ctx) => {
      if (job.data.fail) throw declined(job.data.fail)
      await ctx.effect(`charge:${job.data.order}`, async () => undefined)
      await ctx.runOnce(`receipt:${job.data.order}`, () => undefined)
      await ctx.updateProgress({ step: 'charged' })
      return { charged: job.data.order * 10 }
    },
    { ...options, pollIntervalMs: 100, maintenanceIntervalMs: 0 },
  )
  try {
    const declined = 'card declined: insufficient funds'
    const orderJobs = await orders.addBulk([
      { name: 'charge', data: { order: 1, customer: 'ann' } },
      { name: 'charge', data: { order: 2, customer: 'bob' } },
      { name: 'charge', data: { order: 3, customer: 'cy', fail: declined } },
      { name: 'charge', data: { order: 4, customer: 'dee', fail: declined } },
      { name: 'charge', data: { order: 5, customer: 'eve', fail: 'payment gateway timed out' } },
    ])
    const ids = orderJobs.map((job) => job.id)
    await waitFor(
      async () => {
        const { rows } = await pool.query<{ n: number }>(
          `select count(*)::int as n from "${schema}".jobs where id = any($1::bigint[]) and state in ('completed', 'failed')`,
          [ids],
        )
        return rows[0]!.n === ids.length
      },
      20_000,
      'the seeded orders to finish',
    )
    const keyOwner = await emails.add('send', { to: 'ann@example.com' }, { deduplication: { id: 'welcome:ann' } })
    const ttlOwner = await emails.add(
      'digest',
      { to: 'bob@example.com' },
      { deduplication: { id: 'digest:bob', ttl: 3_600_000 } },
    )
    const delayed = await emails.add('reminder', { to: 'cy@example.com' }, { delay: 3_600_000 })
    const parent = await emails.add('render', { template: 'newsletter' })
    const child = await emails.add('send', { to: 'list@example.com' }, { dependsOn: [parent.id] })
    await emails.upsertJobScheduler('daily-digest', { pattern: '0 8 * * *' }, { name: 'digest' })
    const pausedJob = await reports.add('monthly', { month: '2026-11' })
    await reports.pause()
    // Flow control on the emails queue: at most 3 at once, 100 starts a minute, one at a time per group
    // (docs/flow-control.md).
    await emails.setLimits({ concurrency: 3, rateLimit: { max: 100, durationMs: 60_000 }, group: { concurrency: 1 } })
    return {
      completed: ids.slice(0, 2),
      failed: ids.slice(2),
      keyOwner: keyOwner.id,
      ttlOwner: ttlOwner.id,
      delayed: delayed.id,
      parent: parent.id,
      child: child.id,
      pausedJob: pausedJob.id,
    }
  } finally {
    await worker.close()
    await Promise.all([orders.close(), emails.close(), reports.close(), pool.end()])
  }
}
