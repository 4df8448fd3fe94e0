// Housekeeping (docs/operations.md): rescues expired leases, promotes stranded dependents, deletes expired dedup keys and claims, prunes finished jobs and (if asked) the ledger; one runner at a time.

import type pg from 'pg'
import type { ConnectionOptions } from './db/connection.js'
import { inTransaction } from './db/checkout.js'
import { openPool } from './db/connection.js'
import { checkSchema } from './db/identifiers.js'
import { sqlFor } from './db/sql-files.js'
import { type Logger, checkLogger } from './logger.js'
import { instruments } from './telemetry/metrics.js'
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
  /** False when another runner held the lock at this call's first batch, so this call did nothing. */
  ran: boolean
}

const OPTION_KEYS = ['connectionString', 'pool', 'schema', 'batchSize', 'logger'] as const
/** A call stops after this many full batches of one kind, so that it stays bounded; the next call goes on. */
const MAX_ROUNDS = 50

/**
 * Runs one round of housekeeping on `schema`, in bounded batches. Every batch is its own short transaction, and takes
 * a transaction-level advisory lock first: only one runner works at a time, through a transaction-mode pooler too,
 * and a runner that dies lets go at once. A call whose first batch finds the lock taken returns with `ran: false`; one
 * that finds it taken later stops there (another runner goes on). Every Worker calls it periodically
 * (`maintenanceIntervalMs`); call it yourself from a cron job if you run no workers. Correctness never depends on it
 * having run, except that expired leases and retention wait for it.
 */
export async function runMaintenance(options: MaintenanceOptions): Promise<MaintenanceResult> {
  const opts = checkOptions<MaintenanceOptions>(options, 'options', OPTION_KEYS)
  const schema = checkSchema(opts.schema, 'options.schema')
  const batchSize = opts.batchSize === undefined ? 1000 : checkInteger(opts.batchSize, 'options.batchSize', 1, 100_000)
  const logger = checkLogger(opts.logger, 'options.logger').child({ component: 'pgonce.maintenance' })
  const { pool, owned } = openPool(opts, logger, 1)
  const result: MaintenanceResult = { rescued: 0, expiredKeys: 0, expiredClaims: 0, promoted: 0, pruned: 0, prunedEffects: 0, ran: false }
  const round = new Round(pool, logger, schema)
  try {
    const steps: [keyof MaintenanceResult, () => Promise<number>][] = [
      ['rescued', () => round.drain('rescue-expired-leases', [batchSize])],
      ['promoted', () => round.drain('promote-dependents', [batchSize])],
      ['expiredKeys', () => round.drain('delete-expired-dedup-keys', [batchSize])],
      ['expiredClaims', () => round.drain('delete-expired-claims', [batchSize])],
      ['pruned', () => prune(round, batchSize)],
      ['prunedEffects', () => round.drain('prune-ledger', [batchSize])],
    ]
    for (const [field, step] of steps) {
      ;(result[field] as number) = await step()
      if (round.stopped) break
    }
    result.ran = round.ran
  } finally {
    if (owned) await pool.end()
  }
  if (result.rescued > 0) instruments().rescued.add(result.rescued, { 'pgonce.schema': schema })
  if (result.rescued + result.expiredKeys + result.expiredClaims + result.promoted + result.pruned + result.prunedEffects > 0) {
    logger.info({ ...result, schema }, 'pgonce: housekeeping')
  }
  return result
}

/** One round's batches, each in its own transaction under the schema's housekeeping lock. */
class Round {
  /** A batch ran under the lock. */
  ran = false
  /** A batch found the lock taken: another runner is at work, this round ends. */
  stopped = false

  constructor(readonly pool: pg.Pool, private readonly logger: Logger, readonly schema: string) {}

  /** Repeats a batch statement returning `count` until a batch is not full (or MAX_ROUNDS); returns the total. */
  async drain(file: string, values: unknown[]): Promise<number> {
    const limit = values[values.length - 1] as number
    let total = 0
    for (let i = 0; i < MAX_ROUNDS && !this.stopped; i++) {
      const count = await this.batch(file, values)
      total += count
      if (count < limit) break
    }
    return total
  }

  /** One batch: BEGIN, the lock (or stop), the statement, COMMIT. */
  private batch(file: string, values: unknown[]): Promise<number> {
    return inTransaction(this.pool, this.logger, async (client) => {
      const { rows: [lock] } = await client.query<{ locked: boolean }>(sqlFor('try-maintenance-lock', this.schema), [this.schema])
      if (lock?.locked !== true) {
        this.stopped = true
        return 0
      }
      this.ran = true
      const { rows: [row] } = await client.query<{ count: number }>(sqlFor(file, this.schema), values)
      return row?.count ?? 0
    })
  }
}

/** Retention: for every (queue, state) with finished jobs, those past their period; then each queue's cap. */
async function prune(round: Round, batchSize: number): Promise<number> {
  const { rows: pairs } = await round.pool.query<{ queue: string; state: string }>(sqlFor('finished-queues', round.schema))
  let total = 0
  for (const { queue, state } of pairs) {
    total += await round.drain('prune-finished-jobs', [queue, state, batchSize])
    if (state === 'completed') total += await round.drain('prune-completed-over-cap', [queue, batchSize])
  }
  return total
}
