// Housekeeping (docs/operations.md): rescues expired leases, promotes stranded dependents, deletes expired dedup keys and claims, prunes finished jobs and (if asked) the ledger; one runner at a time.

import { randomUUID } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import type pg from 'pg'
import type { ConnectionOptions } from './db/connection.js'
import { inTransaction } from './db/checkout.js'
import { CONNECTION_OPTION_KEYS, openPool } from './db/connection.js'
import { checkSchema } from './db/identifiers.js'
import { sqlFor } from './db/sql-files.js'
import { type Logger, checkLogger } from './logger.js'
import { instruments } from './telemetry/metrics.js'
import { checkInteger, checkOptions, fail } from './validate.js'

export interface MaintenanceOptions extends ConnectionOptions {
  /** Schema holding pgonce's tables. (Default: `'pgonce'`) */
  schema?: string
  /** Rows changed per statement; each batch is its own short transaction. (Default: 1000) */
  batchSize?: number
  /** A pino-compatible logger. (Default: silent) */
  logger?: Logger
  /** Aborting it stops the round before its next batch; the call then returns what it did so far. (Default: none) */
  signal?: AbortSignal
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
  /**
   * Group limit rows that held nothing deleted: free slots of groups without queued jobs, rate rows out of every
   * window, ended ctx.rateLimit holds of groups (docs/flow-control.md).
   */
  prunedLimits: number
  /** False when another runner held the lock at this call's first batch, so this call did nothing. */
  ran: boolean
}

/** Rows a batch changes unless runMaintenance's `batchSize` says otherwise; a Worker's housekeeping uses it too. */
export const DEFAULT_BATCH_SIZE = 1000
const OPTION_KEYS = [...CONNECTION_OPTION_KEYS, 'schema', 'batchSize', 'logger', 'signal'] as const
/** A call stops after this many full batches of one kind, so that it stays bounded; the next call goes on. */
const MAX_ROUNDS = 50

/**
 * Runs one round of housekeeping on `schema`, in bounded batches. Every batch is its own short transaction, and takes
 * a transaction-level advisory lock first: only one runner works at a time, through a transaction-mode pooler too,
 * and a runner that dies lets go at once. A call whose first batch finds the lock taken returns with `ran: false`; one
 * that finds it taken later stops there (another runner goes on). Every Worker runs the same round periodically
 * (`maintenanceIntervalMs`), paced (RoundSettings); call it yourself from a cron job if you run no workers: it goes at
 * full speed. Correctness never depends on it having run, except that expired leases and retention wait for it.
 */
export async function runMaintenance(options: MaintenanceOptions): Promise<MaintenanceResult> {
  const opts = checkOptions<MaintenanceOptions>(options, 'options', OPTION_KEYS)
  const schema = checkSchema(opts.schema, 'options.schema')
  const batchSize =
    opts.batchSize === undefined ? DEFAULT_BATCH_SIZE : checkInteger(opts.batchSize, 'options.batchSize', 1, 100_000)
  const logger = checkLogger(opts.logger, 'options.logger').child({ component: 'pgonce.maintenance' })
  if (opts.signal !== undefined && !(opts.signal instanceof AbortSignal))
    fail('INVALID_TYPE', 'options.signal', 'must be an AbortSignal')
  const { pool, owned } = openPool(opts, logger, 1)
  try {
    return await housekeepingRound(pool, schema, logger, {
      batchSize,
      ...(opts.signal === undefined ? {} : { signal: opts.signal }),
    })
  } finally {
    await owned?.end()
  }
}

/** How a round is run: runMaintenance goes at full speed; a Worker's housekeeping is paced and stops on its close. */
export interface RoundSettings {
  batchSize: number
  /**
   * After each full batch, wait this many times as long as the batch took before the next one (0: none), and let no
   * other runner of the schema work meanwhile (housekeeping_pace). A Worker's housekeeping waits
   * 3x: a backlog (a retention shortened on a long history) then takes at most about a quarter of one connection's
   * time, however many workers run; measured in bench/DECISIONS.md#paced-housekeeping.
   */
  pace?: number
  /** Aborted: the round stops before its next batch (or during a pause), leaving the rest to the next round. */
  signal?: AbortSignal
}

/** One round of every housekeeping step, under the schema's housekeeping lock batch by batch (runMaintenance's work). */
export async function housekeepingRound(
  pool: pg.Pool,
  schema: string,
  logger: Logger,
  settings: RoundSettings,
): Promise<MaintenanceResult> {
  const { batchSize } = settings
  const result: MaintenanceResult = {
    rescued: 0,
    expiredKeys: 0,
    expiredClaims: 0,
    promoted: 0,
    pruned: 0,
    prunedEffects: 0,
    prunedLimits: 0,
    ran: false,
  }
  const round = new Round(pool, logger, schema, settings.pace ?? 0, settings.signal)
  const steps: [keyof MaintenanceResult, () => Promise<number>][] = [
    ['rescued', () => round.drain('rescue-expired-leases', [batchSize])],
    ['promoted', () => round.drain('promote-dependents', [batchSize])],
    ['expiredKeys', () => round.drain('delete-expired-dedup-keys', [batchSize])],
    ['expiredClaims', () => round.drain('delete-expired-claims', [batchSize])],
    ['pruned', () => prune(round, batchSize)],
    ['prunedEffects', () => round.drain('prune-ledger', [batchSize])],
    ['prunedLimits', () => round.drain('prune-group-limits', [batchSize])],
  ]
  try {
    for (const [field, step] of steps) {
      ;(result[field] as number) = await step()
      if (round.stopped) break
    }
  } finally {
    await round.endPause()
  }
  result.ran = round.ran
  if (result.rescued > 0) instruments().rescued.add(result.rescued, { 'pgonce.schema': schema })
  if (
    result.rescued +
      result.expiredKeys +
      result.expiredClaims +
      result.promoted +
      result.pruned +
      result.prunedEffects +
      result.prunedLimits >
    0
  ) {
    logger.info({ ...result, schema }, 'pgonce: housekeeping')
  }
  return result
}

/** One round's batches, each in its own transaction under the schema's housekeeping lock. */
class Round {
  /** A batch ran under the lock. */
  ran = false
  /** A batch found the lock taken (another runner is at work), or the round was aborted: this round ends. */
  get stopped(): boolean {
    return this.lockTaken || this.signal?.aborted === true
  }

  private lockTaken = false
  /** This round's name in housekeeping_pace. */
  private readonly runner = randomUUID()
  /** This round has written its pause there. */
  private paused = false

  constructor(
    readonly pool: pg.Pool,
    private readonly logger: Logger,
    readonly schema: string,
    private readonly pace: number,
    private readonly signal: AbortSignal | undefined,
  ) {}

  /**
   * Repeats a batch statement returning `count` until a batch is not full (or MAX_ROUNDS); returns the total. A paced
   * round waits `pace` times a full batch's duration before the next one (a batch that is not full ends the step).
   */
  async drain(file: string, values: unknown[]): Promise<number> {
    const limit = values[values.length - 1] as number
    let total = 0
    for (let i = 0; i < MAX_ROUNDS && !this.stopped; i++) {
      const { count, pauseMs } = await this.batch(file, values, limit)
      total += count
      if (count < limit) break
      if (pauseMs > 0) await pause(pauseMs, this.signal)
    }
    return total
  }

  /**
   * One batch: BEGIN, the lock (or stop), the statement, for a paced round's full batch its pause (shared with the
   * other runners: sql/pace-housekeeping.sql), COMMIT.
   */
  private batch(file: string, values: unknown[], limit: number): Promise<{ count: number; pauseMs: number }> {
    return inTransaction(this.pool, this.logger, async (client) => {
      const {
        rows: [lock],
      } = await client.query<{ locked: boolean }>(sqlFor('try-maintenance-lock', this.schema), [
        this.schema,
        this.runner,
      ])
      if (lock?.locked !== true) {
        this.lockTaken = true
        return { count: 0, pauseMs: 0 }
      }
      this.ran = true
      const {
        rows: [row],
      } = await client.query<{ count: number }>(sqlFor(file, this.schema), values)
      const count = row?.count ?? 0
      if (this.pace === 0 || count < limit) return { count, pauseMs: 0 }
      const {
        rows: [paced],
      } = await client.query<{ pause_ms: number }>(sqlFor('pace-housekeeping', this.schema), [this.runner, this.pace])
      this.paused = true
      return { count, pauseMs: paced?.pause_ms ?? 0 }
    })
  }

  /** Ends this round's pause, if it wrote one, so that other runners need not wait for it to expire. */
  async endPause(): Promise<void> {
    if (!this.paused) return
    // A failure here (the database went away) leaves the pause to expire by itself, a second after its end.
    await this.pool
      .query(sqlFor('end-housekeeping-pace', this.schema), [this.runner])
      .catch((err: Error) =>
        this.logger.warn({ err }, 'pgonce: housekeeping could not end its pause; it expires by itself'),
      )
  }
}

/** Waits `ms`, or until `signal` aborts. */
async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await delay(ms, undefined, signal === undefined ? {} : { signal })
  } catch (err) {
    if (!signal?.aborted) throw err
  }
}

/** Retention: for every (queue, state) with finished jobs, those past their period; then each queue's cap. */
async function prune(round: Round, batchSize: number): Promise<number> {
  const { rows: pairs } = await round.pool.query<{ queue: string; state: string }>(
    sqlFor('finished-queues', round.schema),
  )
  let total = 0
  for (const { queue, state } of pairs) {
    if (round.stopped) break
    total += await round.drain('prune-finished-jobs', [queue, state, batchSize])
    if (state === 'completed') total += await round.drain('prune-completed-over-cap', [queue, batchSize])
  }
  return total
}
