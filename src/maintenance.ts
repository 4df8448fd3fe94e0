// Housekeeping (docs/operations.md): rescues expired leases, promotes stranded dependents, deletes expired dedup keys and claims, prunes finished jobs and (if asked) the ledger; one runner at a time.

import type pg from 'pg'
import type { ConnectionOptions } from './db/connection.js'
import { withClient } from './db/checkout.js'
import { openPool } from './db/connection.js'
import { checkSchema } from './db/identifiers.js'
import { sqlFor } from './db/sql-files.js'
import { type Logger, checkLogger } from './logger.js'
import { checkInteger, checkOptions } from './validate.js'

export interface MaintenanceOptions extends ConnectionOptions {
  /** Schema holding pgonce's tables. (Default: `'pgonce'`) */
  schema?: string
  /** Rows changed per statement; each batch is its own short transaction. (Default: 1000) */
  batchSize?: number
  /** A pino-compatible logger. (Default: silent) */
  logger?: Logger
}

export interface MaintenanceResult {
  /** Jobs whose lease had expired, returned to the queue (or failed, when no attempt was left). */
  rescued: number
  /** Expired TTL dedup keys deleted. */
  expiredKeys: number
  /** Expired execution claims and done markers deleted. */
  expiredClaims: number
  /** Jobs moved out of 'waiting-children' whose dependencies had all completed without promoting them (a crash in between). */
  promoted: number
  /** Finished jobs deleted by retention (their queue's period, or its cap on completed jobs). */
  pruned: number
  /** processed_effects rows deleted by the ledger retention (none unless one is set). */
  prunedEffects: number
  /** False when another runner held the lock, so this call did nothing. */
  ran: boolean
}

const OPTION_KEYS = ['connectionString', 'pool', 'schema', 'batchSize', 'logger'] as const
/** A call stops after this many full batches of one kind, so that it stays bounded; the next call goes on. */
const MAX_ROUNDS = 50

/**
 * Runs one round of housekeeping on `schema`, in bounded batches. Only one
 * runner works at a time (a session advisory lock, released at the end or
 * when its connection drops); a call that finds it taken returns at once with
 * `ran: false`. Every Worker calls it periodically (`maintenanceIntervalMs`);
 * call it yourself from a cron job if you run no workers. Correctness never
 * depends on it having run, except that expired leases wait for it.
 */
export async function runMaintenance(options: MaintenanceOptions): Promise<MaintenanceResult> {
  const opts = checkOptions<MaintenanceOptions>(options, 'options', OPTION_KEYS)
  const schema = checkSchema(opts.schema, 'options.schema')
  const batchSize = opts.batchSize === undefined ? 1000 : checkInteger(opts.batchSize, 'options.batchSize', 1, 100_000)
  const logger = checkLogger(opts.logger, 'options.logger').child({ component: 'pgonce.maintenance' })
  const { pool, owned } = openPool(opts, logger, 1)
  const result: MaintenanceResult = { rescued: 0, expiredKeys: 0, expiredClaims: 0, promoted: 0, pruned: 0, prunedEffects: 0, ran: false }
  try {
    await withClient(pool, logger, async (client, discard) => {
      const [lock] = (await client.query<{ locked: boolean }>(sqlFor('try-maintenance-lock', schema), [schema])).rows
      if (!lock?.locked) return
      result.ran = true
      try {
        result.rescued = await drain(client, sqlFor('rescue-expired-leases', schema), [batchSize])
        result.promoted = await drain(client, sqlFor('promote-dependents', schema), [batchSize])
        result.expiredKeys = await drain(client, sqlFor('delete-expired-dedup-keys', schema), [batchSize])
        result.expiredClaims = await drain(client, sqlFor('delete-expired-claims', schema), [batchSize])
        result.pruned = await prune(client, schema, batchSize)
        result.prunedEffects = await drain(client, sqlFor('prune-ledger', schema), [batchSize])
      } catch (err) {
        // A client whose unlock may not run must not go back to the pool holding the lock.
        discard(err as Error)
        throw err
      } finally {
        await client.query(sqlFor('release-maintenance-lock', schema), [schema]).catch(discard)
      }
    })
  } finally {
    if (owned) await pool.end()
  }
  if (result.rescued + result.expiredKeys + result.expiredClaims + result.promoted + result.pruned + result.prunedEffects > 0) {
    logger.info({ ...result, schema }, 'pgonce: housekeeping')
  }
  return result
}

/** Retention: for every (queue, state) with finished jobs, those past their period; then each queue's cap. */
async function prune(client: pg.PoolClient, schema: string, batchSize: number): Promise<number> {
  const { rows: pairs } = await client.query<{ queue: string; state: string }>(sqlFor('finished-queues', schema))
  let total = 0
  for (const { queue, state } of pairs) {
    total += await drain(client, sqlFor('prune-finished-jobs', schema), [queue, state, batchSize])
    if (state === 'completed') total += await drain(client, sqlFor('prune-completed-over-cap', schema), [queue, batchSize])
  }
  return total
}

/** Repeats a batch statement returning `count` until a batch is not full (or MAX_ROUNDS); returns the total. */
async function drain(client: pg.PoolClient, text: string, values: unknown[]): Promise<number> {
  const limit = values[values.length - 1] as number
  let total = 0
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const [row] = (await client.query<{ count: number }>(text, values)).rows
    const count = row?.count ?? 0
    total += count
    if (count < limit) break
  }
  return total
}
