// Effects: execution-side dedup — runOnce claims (token-fenced, expiring) and the durable processed_effects ledger.

import { randomUUID } from 'node:crypto'
import type pg from 'pg'
import type { CacheOutcome } from './cache/breaker.js'
import { Cache } from './cache/cache.js'
import { endingFacts } from './cache/invalidation.js'
import { EffectsCache } from './cache/effects-precheck.js'
import { type RedisOption, checkRedisOption } from './cache/redis-client.js'
import { type SettleRow, settleOf } from './cache/settle.js'
import { Counters } from './counters.js'
import { countInto } from './telemetry/metrics.js'
import { CONNECTION_OPTION_KEYS, type ConnectionOptions, openPool } from './db/connection.js'
import { closeWithin, type PgoncePool } from './db/pool.js'
import { type Execute, type Transactional, executorFor } from './db/executor.js'
import { checkSchema } from './db/identifiers.js'
import { sqlFor } from './db/sql-files.js'
import { type Logger, checkLogger } from './logger.js'
import { SchemaReady } from './migrate/schema-ready.js'
import { MAX_DURATION_MS, checkBoolean, checkInteger, checkOptions, checkText, fail } from './validate.js'

export interface EffectsOptions extends ConnectionOptions {
  /** Schema holding pgonce's tables. (Default: `'pgonce'`) */
  schema?: string
  /** A pino-compatible logger. (Default: silent) */
  logger?: Logger
  /** Run migrations on first use. (Default: true) */
  migrate?: boolean
  /** Size of the pool pgonce opens from `connectionString`. (Default: 10) */
  poolSize?: number
  /** Use named prepared statements; false behind a transaction-mode pooler (see QueueOptions). (Default: true) */
  preparedStatements?: boolean
  /**
   * Redis for the pre-checks (docs/redis.md): a runOnce key that is done (until its doneTtl) answers
   * `'duplicate-done'`, and a recorded ledger key answers `record(...) === false`, without a Postgres round trip. Your
   * ioredis client (never closed by pgonce) or a URL (pgonce opens ioredis and closes it). (Default: none)
   */
  redis?: RedisOption
}

export interface RunOnceOptions {
  /** How long the claim holds before another caller may take it over; keep it above the work's worst-case duration. (Default: 300000 ms) */
  claimTtl?: number
  /** How long the done marker keeps later calls out; omit to keep it until you delete it. (Default: forever) */
  doneTtl?: number
}

/** What `runOnce` decided: this call ran the work, or the key was already done, or another holder is running it. */
export type RunOnceOutcome = 'ran' | 'duplicate-done' | 'duplicate-running'

/**
 * The outcomes counted by `effects.outcomes`; `claim-lost` counts work that ran but whose claim was no longer its own at
 * completion; `recorded` counts `effects.record` answering true (its `false` counts as `duplicate-done`).
 */
export type EffectOutcome = RunOnceOutcome | 'claim-lost' | 'recorded'

/** Default `claimTtl`: five minutes. */
export const DEFAULT_CLAIM_TTL_MS = 300_000

const OPTION_KEYS = [
  ...CONNECTION_OPTION_KEYS,
  'schema',
  'logger',
  'migrate',
  'poolSize',
  'preparedStatements',
  'redis',
] as const
const RUN_ONCE_KEYS = ['claimTtl', 'doneTtl'] as const
/** A claim read that finds the row gone or expired retries the claim; this bounds a pathological loop. */
const MAX_CLAIM_ROUNDS = 100
const COMPLETE_ATTEMPTS = 3

export class Effects {
  readonly schema: string
  /**
   * Outcomes of `runOnce` (and, in a Worker, of `ctx.effect` and `ctx.runOnce`) since this Effects was made, for
   * metrics; also fed to the OpenTelemetry counter pgonce.effects.
   */
  readonly outcomes: Counters<EffectOutcome>
  /** How the Redis pre-checks went (hit, miss, fallback, breaker-open, unsynced), for metrics; empty without `redis`. */
  readonly cacheOutcomes: Counters<CacheOutcome>
  // ES private fields: the pool (and its connection string), the cache and the logger stay out of what a logger,
  // JSON.stringify or util.inspect reads from an Effects (docs/observability.md, "Logging").
  readonly #cache: EffectsCache | undefined
  readonly #pool: pg.Pool
  readonly #logger: Logger
  readonly #ready: SchemaReady
  private readonly ownsCache: boolean
  /** The pool pgonce opened (and ends), null for yours. */
  readonly #owned: PgoncePool | null
  /** How long close() may take (docs/operations.md, "Bounded waits"). */
  readonly #closeBoundMs: number
  private readonly named: boolean
  private closed = false

  /** `shared.cache`: a Worker's cache layer, used instead of opening one; `shared.queue`: its queue (internal). */
  constructor(options: EffectsOptions, shared?: { cache?: Cache; queue?: string }) {
    this.outcomes = new Counters<EffectOutcome>(countInto('effects', shared?.queue))
    const opts = checkOptions<EffectsOptions>(options, 'options', OPTION_KEYS)
    this.schema = checkSchema(opts.schema, 'options.schema')
    const poolSize = opts.poolSize === undefined ? 10 : checkInteger(opts.poolSize, 'options.poolSize', 1, 1000)
    const migrateOnFirstUse = opts.migrate === undefined || checkBoolean(opts.migrate, 'options.migrate')
    this.named =
      opts.preparedStatements === undefined || checkBoolean(opts.preparedStatements, 'options.preparedStatements')
    this.#logger = checkLogger(opts.logger, 'options.logger').child({ component: 'pgonce.effects' })
    const { pool, owned, bounds } = openPool(opts, this.#logger, poolSize)
    this.#pool = pool
    this.#owned = owned
    this.#closeBoundMs = bounds.answerMs
    this.#ready = new SchemaReady(pool, this.schema, this.#logger, migrateOnFirstUse)
    const redis = checkRedisOption(opts.redis, 'options.redis')
    const cache =
      shared?.cache ??
      (redis === undefined
        ? undefined
        : new Cache({ redis, pool, schema: this.schema, named: this.named, logger: this.#logger }))
    this.ownsCache = shared?.cache === undefined
    this.#cache = cache && new EffectsCache(cache)
    this.cacheOutcomes = cache?.outcomes ?? new Counters<CacheOutcome>()
  }

  /**
   * Runs `work` unless key `key` is already done or claimed (seed 000, steps 3–4).
   * One atomic statement claims the key with a random token for `claimTtl`, or
   * takes over a claim whose holder let it expire. If `work` throws, the claim is
   * released (only while the token still matches) and the error rethrown. On
   * success the claim becomes a done marker (only while the token still matches;
   * otherwise the loss is logged, counted as `claim-lost`, and `'ran'` returned,
   * because the work did run). `'duplicate-running'` means "try again later":
   * the holder may still fail.
   */
  async runOnce(key: string, work: () => unknown, opts?: RunOnceOptions): Promise<RunOnceOutcome> {
    checkText(key, 'key')
    if (typeof work !== 'function') fail('INVALID_TYPE', 'work', 'must be a function')
    const o = checkOptions<RunOnceOptions>(opts, 'opts', RUN_ONCE_KEYS)
    const claimTtl =
      o.claimTtl === undefined ? DEFAULT_CLAIM_TTL_MS : checkInteger(o.claimTtl, 'opts.claimTtl', 1, MAX_DURATION_MS)
    const doneTtl = o.doneTtl === undefined ? null : checkInteger(o.doneTtl, 'opts.doneTtl', 1, MAX_DURATION_MS)
    const execute = await this.executor()
    if (await this.#cache?.claimDone(key)) return this.decided('duplicate-done', key)

    const token = randomUUID()
    const refused = await this.claim(execute, key, token, claimTtl)
    if (refused === 'duplicate-done') this.#cache?.rememberClaim(key)
    if (refused !== null) return this.decided(refused, key)

    try {
      await work()
    } catch (err) {
      await this.release(execute, key, token)
      throw err
    }
    await this.complete(execute, key, token, doneTtl)
    return this.decided('ran', key)
  }

  /**
   * Records effect key `key` in `processed_effects` inside your transaction `tx`
   * (seed 000, step 6): `true` the first time (go ahead with the effect),
   * `false` when it was already recorded (skip it). If your transaction rolls
   * back, nothing is recorded. A concurrent `record` of the same key waits for
   * yours to commit or roll back, then answers. With `redis`, a key whose recording has committed may be answered
   * `false` from Redis without a statement in `tx` (docs/redis.md).
   */
  async record(tx: Transactional, key: string): Promise<boolean> {
    executorFor(tx, 'tx', this.named)
    if (await this.knownRecorded(key)) {
      this.#logger.debug({ key, first: false }, 'pgonce: effect recorded (known from Redis)')
      this.outcomes.increment('duplicate-done')
      return false
    }
    const first = await this.recordInLedger(tx, key)
    // Counted when answered: a `recorded` whose transaction then rolls back is still counted.
    this.outcomes.increment(first ? 'recorded' : 'duplicate-done')
    return first
  }

  /**
   * @internal `record` after {@link knownRecorded} said no (ctx.effect asks before opening its transaction); `jobId`:
   * the job whose ctx.effect records it (the ledger row names it).
   */
  async recordInLedger(tx: Transactional, key: string, jobId: string | null = null): Promise<boolean> {
    const execute = executorFor(tx, 'tx', this.named)
    const rows = await execute(sqlFor('effects-record', this.schema), [key, jobId])
    const first = rows.length > 0
    this.#logger.debug({ key, first }, 'pgonce: effect recorded')
    return first
  }

  /**
   * Sets how long `processed_effects` rows are kept (stored in Postgres; every worker's housekeeping prunes by it). By
   * default, and after `null`, the ledger is kept forever: it is the durable record that an effect happened, and a
   * replay of a job older than the retention would apply its effect again. With `{ tx }`, only if you commit.
   */
  async setLedgerRetention(ms: number | null, options?: { tx?: Transactional }): Promise<void> {
    const { tx } = checkOptions<{ tx?: Transactional }>(options, 'options', ['tx'])
    const value = ms === null ? null : checkInteger(ms, 'ms', 1, MAX_DURATION_MS)
    const inTx = tx === undefined ? undefined : executorFor(tx, 'options.tx', this.named)
    const pooled = await this.executor()
    const execute = inTx ?? pooled
    await endingFacts(
      this.#cache?.cache,
      () => 'all',
      tx !== undefined,
      () => execute<SettleRow>(sqlFor('set-ledger-retention', this.schema), [value, tx === undefined]),
      settleOf,
    )
  }

  /** @internal Checks `key`, migrates on first use; true when `key` is known recorded (from Redis): no statement needed. */
  async knownRecorded(key: string): Promise<boolean> {
    checkText(key, 'key')
    await this.executor()
    return (await this.#cache?.effectRecorded(key)) === true
  }

  /** @internal ctx.effect found `key` recorded by another transaction (committed): Redis may answer its next repeat. */
  repeatedEffect(key: string): void {
    this.#cache?.rememberEffect(key)
  }

  /**
   * Ends the pool pgonce opened (a pool you passed in is left open). Calls in flight get `statementTimeoutMs` + 2 s to
   * finish; then their connections are dropped (they fail), and close() returns within a second whatever the server does.
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await closeWithin(
      this.#closeBoundMs,
      async () => {
        await this.#ready.settle()
        if (this.ownsCache) await this.#cache?.cache.close()
        await this.#owned?.end()
      },
      () => this.#owned?.abandon(),
    )
  }

  /** Takes the claim (null), or says why not; loops while the holder vanishes or expires between the two reads. */
  private async claim(
    execute: Execute,
    key: string,
    token: string,
    claimTtl: number,
  ): Promise<Exclude<RunOnceOutcome, 'ran'> | null> {
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const claimed = await execute(sqlFor('effects-claim', this.schema), [key, token, claimTtl])
      if (claimed.length > 0) return null
      const [row] = await execute<{ state: 'running' | 'done'; held: boolean }>(
        sqlFor('effects-claim-state', this.schema),
        [key],
      )
      if (row?.held) return row.state === 'done' ? 'duplicate-done' : 'duplicate-running'
    }
    throw new Error(`pgonce: could not claim or read execution key '${key}' after ${MAX_CLAIM_ROUNDS} rounds`)
  }

  private async release(execute: Execute, key: string, token: string): Promise<void> {
    try {
      const rows = await execute(sqlFor('effects-release', this.schema), [key, token])
      this.#logger.debug({ key, released: rows.length > 0 }, 'pgonce: claim released after failed work')
    } catch (err) {
      // The claim then blocks the key until it expires; the work's own error is what the caller needs.
      this.#logger.warn({ err, key }, 'pgonce: could not release claim; it holds until it expires')
    }
  }

  private async complete(execute: Execute, key: string, token: string, doneTtl: number | null): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        const rows = await execute(sqlFor('effects-complete', this.schema), [key, token, doneTtl])
        if (rows.length > 0) return
        this.outcomes.increment('claim-lost')
        this.#logger.warn(
          { key },
          'pgonce: claim lost before completion (expired and taken over, or removed); the work may have run twice',
        )
        return
      } catch (err) {
        if (attempt >= COMPLETE_ATTEMPTS) {
          // The work ran: report it as such, but say the done marker was not written.
          this.outcomes.increment('claim-lost')
          this.#logger.warn({ err, key }, 'pgonce: could not mark claim done; it holds until it expires')
          return
        }
      }
    }
  }

  private decided(outcome: RunOnceOutcome, key: string): RunOnceOutcome {
    this.outcomes.increment(outcome)
    this.#logger.debug({ key, outcome }, 'pgonce: runOnce decided')
    return outcome
  }

  /** Migrates on first use, then gives pgonce's pool as an executor (a caller's `tx` is checked where it is taken). */
  private async executor(): Promise<Execute> {
    if (this.closed) throw new Error('pgonce: this Effects is closed')
    await this.#ready.ensure()
    await this.#cache?.cache.start()
    return executorFor(this.#pool, 'options.pool', this.named)
  }
}
