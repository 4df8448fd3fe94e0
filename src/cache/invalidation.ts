// The Redis layer's invalidation: every call that ends a cached fact holds its bucket, runs, then publishes the
// bucket's new epoch (or, when Redis cannot be told, waits out the listeners' lease); and the argument that no stale
// positive survives.
//
// WHY NO STALE POSITIVE SURVIVES (docs/redis.md says it in plain words; the Postgres side is the baseline migration's
// section "The Redis layer's invalidation").
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
// (3) No window through pgonce. A fact ended through pgonce with Redis, outside a caller's transaction, has no window
//     for anyone once the call returns: the call holds the bucket in Redis before its statement (pre-checks of the
//     bucket miss meanwhile), and after the commit reads the bucket's epoch and raises the epoch key in Redis before it
//     returns. A fact ended through pgonce without Redis (or with a Redis it could not reach) has none either: the
//     call waits the settle interval (100 ms) after its commit while any cache listener's lease lasts (the
//     statement's cache_settle_ms, docs/redis.md), and by then every process has heard the bump or stopped
//     answering from Redis, by (4). The same for SQL through remove_dedup_key() or followed by wait_for_caches(). The
//     statement decides whether to wait before it commits, under a lock a listener that starts meanwhile waits for
//     before it reads the epochs (sql/cache-listen.sql): a listener it could not see knows the end without the wait.
//     What is left: a fact ended by bare SQL, or inside a caller's transaction (from its commit, once the hold of
//     HOLD_MS has gone), may be answered by process P until P has the NOTIFY of the commit, or any listener has copied
//     that epoch into Redis, and for at most the lease (100 ms) after the commit, by (4).
// (4) The lease. P answers from Redis only while its listener is synced (below) and two leases last
//     (src/cache/listener-lease.ts): P has heard, within 100 ms of sending it, a heartbeat NOTIFY sent from its pool
//     (PostgreSQL delivers NOTIFYs in commit order, so P has heard every bump committed before that heartbeat was
//     sent), and P's row in cache_listeners, which ending statements read, has not run out (P writes it before it
//     takes the slot and reads the epochs: a statement that could not see it held the lock P's slot waits for, and P
//     read the epochs after its commit). A
//     session that stops delivering without closing (a frozen backend still answers keepalives) stops the cache
//     within 100 ms and is replaced once a committed heartbeat went unheard for 2 s. From the moment P's listener
//     connection fails until it is back, LISTENs, holds the slot and has read every epoch again, P asks Postgres for
//     everything. A sync that finds the server started anew (a start time
//     other than the one P or Redis saw) or an epoch below what P or Redis saw bumps every bucket above all of them
//     first (invalidate_cache), so a restart, a failover or a restore from backup cannot bring an old namespace back;
//     epochs that fall back again soon after keep P off Redis. Epochs are microseconds of the clock or more, so that
//     no bump after a restore reuses one. A restore into a running server is found by the next sync (a poll every
//     30 s, or any process starting), or at once with `select <schema>.invalidate_cache()`.
// (5) Time. Each entry carries its fact's end T by the database clock; a hit needs T after an upper bound of the
//     database clock now (src/cache/db-clock.ts). A SET delayed in a slow Redis, whose TTL starts late, changes nothing.
// (6) Redis faults only lose entries (a flush, eviction, a restart): a lost entry is a miss. A lost epoch key or hold
//     (eviction under allkeys-*, a flush between a call's steps) brings back, for a call through pgonce with Redis,
//     the window of a bare SQL end: until the NOTIFY arrives, within the lease. A Redis write
//     that times out may still happen later; every write here is safe late (an entry under an old epoch is
//     unreachable, an epoch key only rises, a hold expires).
//
// Residual risks, written down rather than hidden: triggers disabled (session_replication_role = replica, or a restore
// into a running server, until (4) finds it), a database clock stepped backwards (entries outlive their end) or
// forwards past the 30 s lease of cache_listeners (a removal without Redis may not wait), a failover to a replica that lost
// commits noticed only when the listener notices its connection is gone, two copies of one database (same
// settings.cache_instance) sharing one Redis, and SHA-256 collisions of two keys (2^-160 per pair).

import type { Execute } from '../db/executor.js'
import { sqlFor } from '../db/sql-files.js'
import type { Logger } from '../logger.js'
import { FAILED, type RedisGate } from './breaker.js'
import type { EpochListener } from './epoch-listener.js'
import type { Fact, KeyNames } from './keys.js'
import type { RedisLike } from './redis-client.js'
import { hold, raiseEpochs, release } from './scripts.js'
import { settle } from './settle.js'

/** How long a hold keeps a bucket's pre-checks missing when its call never releases it (a crash, a caller's transaction). */
export const HOLD_MS = 10_000

/** What the invalidation needs of the Cache. */
export interface CacheState {
  readonly gate: RedisGate
  /** pgonce's pool, for the reads that follow a commit. */
  readonly execute: Execute
  readonly schema: string
  /** Entries and holds may be written. */
  readonly writable: boolean
  readonly isClosed: boolean
  /** The open Redis and this schema's key names, null before start(). */
  connection(): { client: RedisLike; names: KeyNames } | null
  listening(): EpochListener | null
  start(): Promise<void>
}

interface EpochRow {
  bucket: number
  epoch: string
}

export class Invalidation {
  constructor(
    private readonly cache: CacheState,
    private readonly logger: Logger,
  ) {}

  /** Before a statement that may end facts of `buckets`: pre-checks of them miss until released (or HOLD_MS). True if held. */
  async hold(buckets: readonly number[]): Promise<boolean> {
    const redis = this.cache.connection()
    if (redis === null || !this.cache.writable || buckets.length === 0) return false
    const done = await this.cache.gate.run('hold', () =>
      hold(
        redis.client,
        buckets.map((b) => redis.names.hold(b)),
        HOLD_MS,
      ),
    )
    return done !== FAILED
  }

  async release(buckets: readonly number[]): Promise<void> {
    const redis = this.cache.connection()
    if (redis === null || buckets.length === 0) return
    await this.cache.gate.run('release', () =>
      release(
        redis.client,
        buckets.map((b) => redis.names.hold(b)),
      ),
    )
  }

  /**
   * After a commit that may have ended facts of `buckets` (null: of any bucket whose epoch is not `before`'s): reads
   * their epochs from Postgres, learns them, and raises the epoch keys in Redis, so that no process answers an ended
   * fact from here on (see (3)). False when Redis could not be told (then the caller waits out the leases).
   */
  async publish(buckets: readonly number[] | null, before: readonly number[] = []): Promise<boolean> {
    const redis = this.cache.connection()
    if (redis === null || this.cache.isClosed) return false
    let rows: EpochRow[]
    try {
      rows = await this.cache.execute<EpochRow>(sqlFor('cache-epochs', this.cache.schema), [buckets])
    } catch (err) {
      this.logger.warn(
        { err },
        'pgonce: could not read the cache epochs after a change; other processes learn it by NOTIFY',
      )
      return false
    }
    const known = rows
      .map((r) => ({ bucket: r.bucket, epoch: Number(r.epoch) }))
      .filter((r) => buckets !== null || r.epoch > (before[r.bucket] ?? 0))
    for (const r of known) this.cache.listening()?.learn(r.bucket, r.epoch)
    if (known.length === 0) return true
    const raised = await this.cache.gate.run('raise epochs', () =>
      raiseEpochs(
        redis.client,
        known.map((r) => redis.names.epoch(r.bucket)),
        known.map((r) => r.epoch),
      ),
    )
    return raised !== FAILED
  }

  /**
   * Runs `statement`, which may end facts of `facts` ('all': of any bucket, unknown beforehand), with the invalidation
   * of (3): hold, statement, then (outside a caller's transaction) publish, and when Redis could not be told, the wait
   * `settleMs` of its answer says; then release.
   */
  async ending<T>(
    facts: readonly Fact[] | 'all',
    inCallerTx: boolean,
    statement: () => Promise<T>,
    settleMs: (result: T) => number | Promise<number>,
  ): Promise<T> {
    const buckets = facts === 'all' ? [] : [...new Set(facts.map((f) => f.bucket))]
    if (facts !== 'all' && buckets.length === 0) return statement()
    await this.cache.start()
    const before = facts === 'all' ? (this.cache.listening()?.epochs() ?? []) : []
    const held = await this.hold(buckets)
    let done: { result: T } | null = null
    try {
      done = { result: await statement() }
      return done.result
    } finally {
      if (!inCallerTx) {
        const published = await this.publish(facts === 'all' ? null : buckets, before)
        if (!published && done !== null) await settle(await settleMs(done.result))
        if (held) await this.release(buckets)
      }
    }
  }
}

/**
 * `statement` with {@link Invalidation.ending} when there is a cache; when there is none, outside a caller's
 * transaction, the wait `settleMs` of its answer says (docs/redis.md): either way no process answers an ended fact
 * from Redis once this returns.
 */
export async function endingFacts<T>(
  cache: { invalidation: Invalidation } | undefined,
  facts: () => readonly Fact[] | 'all',
  inCallerTx: boolean,
  statement: () => Promise<T>,
  settleMs: (result: T) => number | Promise<number>,
): Promise<T> {
  if (cache !== undefined) return cache.invalidation.ending(facts(), inCallerTx, statement, settleMs)
  const result = await statement()
  if (!inCallerTx) await settle(await settleMs(result))
  return result
}
