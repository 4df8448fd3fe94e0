// The Redis pre-check layer's core: opening Redis and the epoch listener, entries read and written under their
// bucket's epoch. Why no stale positive survives, and the invalidation around every call that ends a fact:
// src/cache/invalidation.ts.

import type pg from 'pg'
import { type Execute, executorFor } from '../db/executor.js'
import { channelOf } from '../db/identifiers.js'
import { sqlFor } from '../db/sql-files.js'
import type { Logger } from '../logger.js'
import { FAILED, RedisGate } from './breaker.js'
import { DbClock } from './db-clock.js'
import { EpochListener } from './epoch-listener.js'
import { type Fact, KeyNames } from './keys.js'
import {
  COMMAND_TIMEOUT_MS,
  type RedisHandle,
  type RedisLike,
  type RedisOption,
  openRedis,
  warnIfEvicting,
} from './redis-client.js'
import { type CacheState, Invalidation } from './invalidation.js'
import { listenConfig } from '../db/listen-config.js'

/** The longest an entry stays in Redis (a fact without end, or with a distant one, is asked again after it). */
export const MAX_ENTRY_TTL_MS = 86_400_000
/** An entry whose fact ends sooner than this is not written. */
const MIN_ENTRY_TTL_MS = 50
/** Larger entries are not written (a job with large data is answered by Postgres). */
export const MAX_ENTRY_BYTES = 16_384
/** How long close() waits for entries and reads still being written. */
const CLOSE_WAIT_MS = 2_000

export interface CacheSetup {
  redis: RedisOption
  /** pgonce's pool for this schema: the reads after commits, and the listener's connection settings. */
  pool: pg.Pool
  schema: string
  /** Named prepared statements (false behind a transaction-mode pooler). */
  named: boolean
  /** Where the listener connects when it must not go where the pool does (a Worker's listenConnectionString). (Default: the pool's settings) */
  listenConnectionString?: string | null
  logger: Logger
}

export class Cache implements CacheState {
  readonly clock = new DbClock()
  readonly gate: RedisGate
  /** Hold, statement, publish: around every call that ends a cached fact (see its file for the argument). */
  readonly invalidation: Invalidation
  /** pgonce's pool, for the reads that follow a commit. */
  readonly execute: Execute
  readonly schema: string
  private readonly logger: Logger
  /** The open Redis and the names of this schema's keys in it, once start() is done. */
  private redis: { handle: RedisHandle; client: RedisLike; names: KeyNames } | null = null
  private listener: EpochListener | null = null
  private opening: Promise<void> | undefined
  private connecting: Promise<RedisHandle> | undefined
  private readonly pending = new Set<Promise<unknown>>()
  private closed = false

  constructor(private readonly setup: CacheSetup) {
    this.schema = setup.schema
    this.logger = setup.logger.child({ component: 'pgonce.cache' })
    this.gate = new RedisGate(COMMAND_TIMEOUT_MS, this.logger)
    this.execute = executorFor(setup.pool, 'options.pool', setup.named)
    this.invalidation = new Invalidation(this, this.logger)
  }

  get isClosed(): boolean {
    return this.closed
  }

  connection(): { client: RedisLike; names: KeyNames } | null {
    return this.redis
  }

  listening(): EpochListener | null {
    return this.listener
  }

  /** True once Redis is open (and connected, for a client pgonce opened) and until close(): entries may be written. */
  get writable(): boolean {
    return this.redis !== null && this.redis.handle.connected() && !this.closed
  }

  /** The outcome counters (see CacheOutcome). */
  get outcomes(): RedisGate['outcomes'] {
    return this.gate.outcomes
  }

  /**
   * Opens Redis (importing ioredis only now, for a URL: this is where a missing ioredis is reported) and starts the
   * epoch listener; call it once the schema is migrated. Every later call returns the same promise.
   */
  start(): Promise<void> {
    this.opening ??= this.open()
    return this.opening
  }

  private async open(): Promise<void> {
    // A missing ioredis rejects this for good; a database that could not be read is asked again on the next call.
    this.connecting ??= openRedis(this.setup.redis, this.logger)
    const handle = await this.connecting
    let instance: string
    try {
      const [row] = await this.execute<{ cache_instance: string }>(sqlFor('cache-instance', this.schema), [])
      instance = (row as { cache_instance: string }).cache_instance
    } catch (err) {
      this.opening = undefined
      throw err
    }
    if (this.closed) return
    const names = new KeyNames(this.schema, instance)
    this.redis = { handle, client: handle.client, names }
    void handle.ready.then(() => warnIfEvicting(handle.client, this.logger))
    // Keepalives (in listenConfig): a silently dropped connection must be noticed, for the cache stops answering only
    // once it is.
    const config = listenConfig(
      this.setup.pool,
      this.setup.listenConnectionString ?? null,
      `pgonce-cache ${this.schema} ${process.pid}`,
    )
    this.listener = new EpochListener(
      config,
      channelOf(this.schema),
      this.schema,
      handle.client,
      names,
      this.gate,
      this.clock,
      this.execute,
      this.logger,
    )
    this.listener.start()
  }

  /**
   * The payload of `fact`'s entry, or null (go to Postgres): only while the listener is synced and under its lease
   * (before the call and after Redis answered), under the epoch this process knows for the bucket, with no newer epoch
   * or hold in Redis, and while the fact's end is ahead (see (2), (3), (5)).
   */
  async lookup(fact: Fact): Promise<string | null> {
    const listener = this.listener
    const redis = this.redis
    listener?.touch()
    if (listener === null || redis === null || !listener.trusted()) {
      this.gate.outcomes.increment('unsynced')
      return null
    }
    const { client, names } = redis
    const b = fact.bucket
    const epoch = listener.epoch(b)
    const got = await this.gate.run('pre-check', () =>
      client.mget(names.epoch(b), names.hold(b), names.entry(fact, epoch)),
    )
    if (got === FAILED) return null
    const [stored, held, value] = got
    const newer = Number(stored ?? 0)
    if (newer > epoch) listener.learn(b, newer)
    const entry = parseEntry(value)
    const dbNow = this.clock.upper()
    // A NOTIFY heard meanwhile, or the listener gone or its lease run out meanwhile, count too.
    const current = newer <= epoch && listener.trusted() && listener.epoch(b) === epoch
    if (!current || Number(held ?? 0) > 0 || entry === null || dbNow === null || !(entry.ends > dbNow)) {
      this.gate.outcomes.increment('miss')
      return null
    }
    this.gate.outcomes.increment('hit')
    return entry.payload
  }

  /**
   * Writes `fact`'s entry in the background under `epoch`, read in the same snapshot as the fact by a statement that
   * has committed (see (1)); `endsMs` is when the fact ends by the database clock (null: never), `dbNowMs` that
   * snapshot's clock.
   */
  remember(fact: Fact, epoch: number, payload: string, endsMs: number | null, dbNowMs: number): void {
    const redis = this.redis
    if (redis === null || !this.writable || !Number.isFinite(epoch)) return
    const ttl = endsMs === null ? MAX_ENTRY_TTL_MS : Math.min(MAX_ENTRY_TTL_MS, Math.floor(endsMs - dbNowMs))
    const value = `${endsMs ?? ''}|${payload}`
    if (!(ttl >= MIN_ENTRY_TTL_MS) || value.length > MAX_ENTRY_BYTES) return
    this.background(this.gate.run('remember', () => redis.client.set(redis.names.entry(fact, epoch), value, 'PX', ttl)))
  }

  /** Tracks `work` (a read after a commit, a write of an entry) running in the background; close() waits for it. */
  background(work: Promise<unknown>): void {
    const tracked = work
      .catch((err: Error) => this.logger.debug({ err }, 'pgonce: cache entry not written'))
      .finally(() => this.pending.delete(tracked))
    this.pending.add(tracked)
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.opening?.catch(() => {})
    await Promise.race([Promise.allSettled([...this.pending]), new Promise((r) => setTimeout(r, CLOSE_WAIT_MS))])
    await this.listener?.stop()
    const handle = await this.connecting?.catch(() => undefined)
    await handle?.close()
  }
}

/** An entry's value, `<end ms, by the database clock; empty: none>|<payload>`; null when absent or not one. */
function parseEntry(value: string | null | undefined): { ends: number; payload: string } | null {
  const cut = value?.indexOf('|') ?? -1
  if (value === null || value === undefined || cut < 0) return null
  return { ends: cut === 0 ? Number.POSITIVE_INFINITY : Number(value.slice(0, cut)), payload: value.slice(cut + 1) }
}
