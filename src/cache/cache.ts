// The Redis pre-check layer's core: entries read and written under their bucket's epoch, and the invalidation around every call that ends a fact.
//
// WHY NO STALE POSITIVE SURVIVES (docs/redis.md says it in plain words; migration 000006 holds the Postgres side).
//
// What is cached. An entry asserts one fact Postgres held: "key K of queue Q is held with a TTL by job J until T",
// "effect key E is in the ledger (until T, when a ledger retention is set)", "runOnce key C is done (until T, its
// doneTtl)". Nothing else: not a jobId's live generation, not a key without TTL (both end when a job ends, and every
// job end would then have to invalidate), never "absent" (a miss always asks Postgres).
//
// Epochs. Every fact's identity hashes into one of 256 buckets (src/cache/keys.ts, _cache_bucket()); Postgres keeps an
// epoch per bucket in cache_epochs. Every change that ends a cacheable fact, whoever makes it (pgonce with or without
// Redis, psql, another program, a cascade from a deleted job), fires a trigger that bumps the fact's bucket when its
// transaction commits, and NOTIFYs '!cache <bucket> <epoch>' on the schema's channel while a cache listener holds the
// listener slot. Ends: a held TTL key deleted, moved, or its expiry brought forward or removed (removeDeduplicationKey,
// replace, a shortening extend, removeJob, a SQL delete); a ledger row deleted before retention could prune it, its
// recorded_at moved earlier, the retention set or changed; a done marker deleted or shortened while unexpired; TRUNCATE.
// What pgonce itself removes on its own (expired keys and claims, ledger rows past retention, finished jobs that own no
// held TTL key, a retryJob re-taking only a key nobody holds, cancelJob leaving TTL keys held) ends no cached fact.
//
// (1) Writing. An entry is written only after the statement that read its fact has committed (a fact read inside a
//     caller's transaction is never cached), under the epoch read in the same snapshot as the fact
//     (sql/add-job-cached.sql, sql/cache-ledger-entry.sql, sql/cache-claim-entry.sql). A transaction X that ends the
//     fact and was not visible to that snapshot commits after it, and bumps the epoch row at commit from a version
//     at least as new as the one read: X's epoch is greater than the entry's. The entry is in an older namespace
//     than every epoch published after X.
// (2) Reading. A process answers from Redis only under the epoch it knows for the bucket, and knows an epoch only as
//     Postgres committed it: the epochs its listener read after LISTEN and after taking the listener slot, the
//     NOTIFYs, the epochs a call of its own read after committing, and the epoch keys in Redis (every copy there came
//     from one of those, and a copy only ever raises a key). A bump NOTIFYs whenever a listener holds the slot; a bump
//     that found none holds the slot's lock until it commits, so a listener taking the slot waits for it and reads
//     its epoch. Each pre-check reads the bucket's epoch key and its hold together with the entry (one MGET) and
//     misses on a newer epoch or a hold.
// (3) The window. A fact ended from outside pgonce-with-Redis (SQL, a process without `redis`, a caller's transaction
//     that commits later) may still be answered by process P from its commit until P has its NOTIFY, or until any
//     listener has copied that epoch into Redis, whichever comes first: about a millisecond on one host, at most until
//     P's listener is seen to be down. A fact ended through pgonce with Redis, outside a caller's transaction, has no
//     window for anyone once the call returns: the call holds the bucket in Redis before its statement (pre-checks of
//     the bucket miss meanwhile), and after the commit reads the bucket's epoch and raises the epoch key in Redis
//     before it returns. Inside a caller's transaction the hold lasts HOLD_MS, and then the NOTIFY at commit decides.
// (4) Listener down. From the moment P's listener connection fails until it is back, LISTENs, holds the slot and has
//     read every epoch again, P asks Postgres for everything. A sync that finds the server started anew (a start time
//     other than the one P or Redis saw) or an epoch below what P or Redis saw bumps every bucket above all of them
//     first (invalidate_cache), so a restart, a failover or a restore from backup cannot bring an old namespace back;
//     epochs that fall back again soon after keep P off Redis. Epochs are microseconds of the clock or more, so that
//     no bump after a restore reuses one. A restore into a running server is found by the next sync (a poll every
//     30 s, or any process starting), or at once with `select <schema>.invalidate_cache()`.
// (5) Time. Each entry carries its fact's end T by the database clock; a hit needs T after an upper bound of the
//     database clock now (src/cache/db-clock.ts). A SET delayed in a slow Redis, whose TTL starts late, changes nothing.
// (6) Redis faults only lose entries (a flush, eviction, a restart): a lost entry is a miss. A lost epoch key or hold
//     (eviction under allkeys-*, a flush between a call's steps) narrows (3) back to the NOTIFY window. A Redis write
//     that times out may still happen later; every write here is safe late (an entry under an old epoch is
//     unreachable, an epoch key only rises, a hold expires).
//
// Residual risks, written down rather than hidden: triggers disabled (session_replication_role = replica, or a restore
// into a running server, until (4) finds it), a database clock stepped backwards, a failover to a replica that lost
// commits noticed only when the listener notices its connection is gone, two copies of one database (same
// settings.cache_instance) sharing one Redis, and SHA-256 collisions of two keys (2^-160 per pair).

import type pg from 'pg'
import { type Execute, executorFor } from '../db/executor.js'
import { channelOf } from '../db/identifiers.js'
import { sqlFor } from '../db/sql-files.js'
import type { Logger } from '../logger.js'
import { FAILED, RedisGate } from './breaker.js'
import { DbClock } from './db-clock.js'
import { EpochListener } from './epoch-listener.js'
import { type Fact, KeyNames } from './keys.js'
import { COMMAND_TIMEOUT_MS, type RedisHandle, type RedisLike, type RedisOption, openRedis, warnIfEvicting } from './redis-client.js'
import { hold, raiseEpochs, release } from './scripts.js'

/** How long a hold keeps a bucket's pre-checks missing when its call never releases it (a crash, a caller's transaction). */
export const HOLD_MS = 10_000
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

interface EpochRow {
  bucket: number
  epoch: string
}

export class Cache {
  readonly clock = new DbClock()
  readonly gate: RedisGate
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
    // The pool's own settings (as the worker's LISTEN connection takes them), with keepalives: a silently dropped
    // connection must be noticed, for the cache stops answering only once it is.
    const listenAt = this.setup.listenConnectionString
    const config: pg.ClientConfig = {
      connectionTimeoutMillis: 10_000,
      ...(listenAt === null || listenAt === undefined ? (this.setup.pool as unknown as { options: pg.ClientConfig }).options : { connectionString: listenAt }),
      application_name: `pgonce-cache ${this.schema} ${process.pid}`,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    }
    const notify = (payload: string) => this.execute(sqlFor('cache-probe', this.schema), [payload])
    this.listener = new EpochListener(config, channelOf(this.schema), this.schema, handle.client, names, this.gate,
      this.clock, notify, this.logger)
    this.listener.start()
  }

  /**
   * The payload of `fact`'s entry, or null (go to Postgres): only while the listener is synced, under the epoch this
   * process knows for the bucket, with no newer epoch or hold in Redis, and while the fact's end is ahead (see (2), (5)).
   */
  async lookup(fact: Fact): Promise<string | null> {
    const listener = this.listener
    const redis = this.redis
    if (listener === null || redis === null || !listener.synced) {
      this.gate.outcomes.increment('unsynced')
      return null
    }
    const { client, names } = redis
    const b = fact.bucket
    const epoch = listener.epoch(b)
    const got = await this.gate.run('pre-check', () => client.mget(names.epoch(b), names.hold(b), names.entry(fact, epoch)))
    if (got === FAILED) return null
    const [stored, held, value] = got
    const newer = Number(stored ?? 0)
    if (newer > epoch) listener.learn(b, newer)
    const entry = parseEntry(value)
    const dbNow = this.clock.upper()
    // A NOTIFY heard meanwhile, or the listener gone meanwhile, count too.
    const current = newer <= epoch && listener.synced && listener.epoch(b) === epoch
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
    const tracked = work.catch((err: Error) => this.logger.debug({ err }, 'pgonce: cache entry not written')).finally(() => this.pending.delete(tracked))
    this.pending.add(tracked)
  }

  /** Before a statement that may end facts of `buckets`: pre-checks of them miss until released (or HOLD_MS). True if held. */
  async hold(buckets: readonly number[]): Promise<boolean> {
    const redis = this.redis
    if (redis === null || !this.writable || buckets.length === 0) return false
    const done = await this.gate.run('hold', () => hold(redis.client, buckets.map((b) => redis.names.hold(b)), HOLD_MS))
    return done !== FAILED
  }

  async release(buckets: readonly number[]): Promise<void> {
    const redis = this.redis
    if (redis === null || buckets.length === 0) return
    await this.gate.run('release', () => release(redis.client, buckets.map((b) => redis.names.hold(b))))
  }

  /**
   * After a commit that may have ended facts of `buckets` (null: of any bucket whose epoch is not `before`'s): reads
   * their epochs from Postgres, learns them, and raises the epoch keys in Redis, so that no process answers an ended
   * fact from here on (see (3)).
   */
  async publish(buckets: readonly number[] | null, before: readonly number[] = []): Promise<void> {
    const redis = this.redis
    if (redis === null || this.closed) return
    let rows: EpochRow[]
    try {
      rows = await this.execute<EpochRow>(sqlFor('cache-epochs', this.schema), [buckets])
    } catch (err) {
      this.logger.warn({ err }, 'pgonce: could not read the cache epochs after a change; other processes learn it by NOTIFY')
      return
    }
    const known = rows.map((r) => ({ bucket: r.bucket, epoch: Number(r.epoch) }))
      .filter((r) => buckets !== null || r.epoch > (before[r.bucket] ?? 0))
    for (const r of known) this.listener?.learn(r.bucket, r.epoch)
    if (known.length === 0) return
    await this.gate.run('raise epochs', () => raiseEpochs(redis.client, known.map((r) => redis.names.epoch(r.bucket)), known.map((r) => r.epoch)))
  }

  /**
   * Runs `statement`, which may end facts of `facts` ('all': of any bucket, unknown beforehand), with the invalidation
   * of (3): hold, statement, then (outside a caller's transaction) publish and release.
   */
  async ending<T>(facts: readonly Fact[] | 'all', inCallerTx: boolean, statement: () => Promise<T>): Promise<T> {
    const buckets = facts === 'all' ? [] : [...new Set(facts.map((f) => f.bucket))]
    if (facts !== 'all' && buckets.length === 0) return statement()
    await this.start()
    const before = facts === 'all' ? (this.listener?.epochs() ?? []) : []
    const held = await this.hold(buckets)
    try {
      return await statement()
    } finally {
      if (!inCallerTx) {
        await this.publish(facts === 'all' ? null : buckets, before)
        if (held) await this.release(buckets)
      }
    }
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

/** `statement` with {@link Cache.ending} when there is a cache, as is when there is none. */
export function endingFacts<T>(cache: Cache | undefined, facts: () => readonly Fact[] | 'all', inCallerTx: boolean,
  statement: () => Promise<T>): Promise<T> {
  return cache === undefined ? statement() : cache.ending(facts(), inCallerTx, statement)
}
