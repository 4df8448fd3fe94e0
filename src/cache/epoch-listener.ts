// The cache layer's LISTEN connection: the epoch of every bucket as Postgres last said, kept current by '!cache' NOTIFYs, re-read after every reconnect; trusted only under its lease (listener-lease.ts).

import type pg from 'pg'
import { PgonceClient } from '../db/client.js'
import type { Execute } from '../db/executor.js'
import { prepareListenSession } from '../db/listen-config.js'
import { NotifyProbe, PROBE_RETRY_MS } from '../db/notify-probe.js'
import { sqlFor } from '../db/sql-files.js'
import type { Logger } from '../logger.js'
import { FAILED, type RedisGate } from './breaker.js'
import type { DbClock } from './db-clock.js'
import { BUCKETS, type KeyNames } from './keys.js'
import { ListenerLease, STALL_MS } from './listener-lease.js'
import type { RedisLike } from './redis-client.js'
import { raiseEpochs } from './scripts.js'

const FIRST_RETRY_MS = 50
const MAX_RETRY_MS = 5_000
/** A safety net: the epochs are read again this often (a restore into a running server is found by it, at the latest). */
const POLL_MS = 30_000
/** A sync that could not read or write Redis tries again after this long. */
const RETRY_MS = 1_000
/** At most one invalidate_cache per this long per process; epochs going back again sooner stop the use of Redis. */
const INVALIDATE_EVERY_MS = 60_000
/** Background Redis commands (the epoch copies, the checks at a sync) may take this long. */
const BACKGROUND_TIMEOUT_MS = 500
/** The longest a statement of the session may take (its waits are for other statements' commits). */
const QUERY_TIMEOUT_MS = 10_000

interface EpochRow {
  bucket: number
  epoch: string
  now_ms: number
  server_started_ms: number
}

/**
 * Knows, per bucket, the newest epoch this process has seen committed in Postgres. `synced` is true only while the
 * connection is up, LISTENs, holds the listener slot (so that every bump NOTIFYs it), and the epochs have been read
 * since: before that, and from the moment the connection fails until it is back and read again, the cache answers
 * nothing from Redis.
 *
 * A sync first checks that its LISTEN hears a NOTIFY sent from another connection (behind a transaction-mode pooler it
 * does not: then Redis stays unused, and an error says why). It also looks for a database that went back in time: a server started anew (a restart, a failover, a restore),
 * or an epoch lower than this process or Redis saw: then every bucket is bumped (invalidate_cache) above every epoch
 * seen, and read again.
 *
 * Being synced is not enough to answer from Redis: a session can stop delivering without closing (a frozen backend
 * still answers keepalives). {@link trusted} also needs the lease (src/cache/listener-lease.ts): a heartbeat heard
 * within 100 ms, and this listener's row in cache_listeners, written before the session takes the slot.
 */
export class EpochListener {
  private readonly known = new Array<number>(BUCKETS).fill(0)
  private client: PgonceClient | null = null
  private syncedNow = false
  /** The server start time of the last sync (as text, as stored in Redis). */
  private serverStarted: string | null = null
  private invalidatedAt = 0
  private stopped = false
  private retryMs = FIRST_RETRY_MS
  private reconnectTimer: NodeJS.Timeout | undefined
  private pollTimer: NodeJS.Timeout | undefined
  private syncing: Promise<void> | null = null
  private resyncWanted = false
  /** Epochs heard by NOTIFY, to copy into Redis in one call (a bump of every bucket sends 256 NOTIFYs at once). */
  private readonly toCopy = new Map<number, number>()
  /** Whether NOTIFYs from other connections reach this LISTEN. */
  private readonly probe: NotifyProbe
  private readonly lease: ListenerLease

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channel: string,
    private readonly schema: string,
    private readonly redis: RedisLike,
    private readonly names: KeyNames,
    private readonly gate: RedisGate,
    private readonly clock: DbClock,
    /** pgonce's pool: the probe NOTIFY from another connection, and the lease's deletion at stop. */
    private readonly pool: Execute,
    private readonly logger: Logger,
  ) {
    this.lease = new ListenerLease(schema, pool, (client) => this.stalled(client), logger)
    // A probe that cannot be sent counts as unheard: the layer stays off Redis until the next sync.
    this.probe = new NotifyProbe('!cache probe ', (payload) =>
      pool(sqlFor('notify-probe', schema), [payload]).catch(() => {}),
    )
  }

  /** True while the epochs below are current (see the class comment). */
  get synced(): boolean {
    return this.syncedNow && this.client !== null
  }

  /** True while Redis may answer: synced, and under the lease (src/cache/listener-lease.ts). */
  trusted(): boolean {
    return this.synced && this.lease.trusted()
  }

  /** A pre-check asked (whether or not it may answer): keeps the heartbeats going. */
  touch(): void {
    this.lease.touch()
  }

  /** The epoch this process knows for `bucket`. */
  epoch(bucket: number): number {
    return this.known[bucket] as number
  }

  /** A copy of every bucket's known epoch. */
  epochs(): number[] {
    return this.known.slice()
  }

  /** Takes a committed epoch learned elsewhere (a NOTIFY, a read after a call that ended a fact, Redis). */
  learn(bucket: number, epoch: number): void {
    if (epoch > (this.known[bucket] as number)) this.known[bucket] = epoch
  }

  start(): void {
    void this.connect()
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.reconnectTimer)
    clearInterval(this.pollTimer)
    const client = this.client
    this.client = null
    this.syncedNow = false
    await this.lease.unregister(this.pool)
    // end() drops the socket when the goodbye goes unanswered (a frozen backend): never waits for ever.
    await client?.end().catch(() => {})
  }

  private async connect(): Promise<void> {
    if (this.stopped) return
    // A statement of the listener's session that takes longer (a frozen backend) fails, and the session is replaced.
    const client = new PgonceClient({ ...this.config, query_timeout: QUERY_TIMEOUT_MS })
    // Every connection pgonce opens has an 'error' listener for its whole life.
    client.on('error', (err) => this.lost(client, err))
    client.on('end', () => this.lost(client, undefined))
    client.on('notification', (msg) => {
      if (msg.channel === this.channel && msg.payload !== undefined && this.probe.heard(msg.payload)) return
      if (msg.channel === this.channel && msg.payload?.startsWith('!cache ')) this.notified(msg.payload.slice(7))
      else if (msg.channel === this.lease.channel) this.lease.notified(msg.payload)
    })
    let adopted = false
    try {
      await client.connect()
      // Names the session (a connection string's application_name would win) and sets the server's keepalives.
      await prepareListenSession(client, this.schema, this.config.application_name ?? 'pgonce-cache')
      await client.query(`listen "${this.channel}"`)
      await client.query(`listen "${this.lease.channel}"`)
      // The row first, then the slot: a removal that could not see the row took its lock before the slot's barrier.
      await this.lease.register(client)
      await client.query(sqlFor('cache-listen', this.schema))
      if (this.stopped) throw new Error('stopped')
      this.client = client
      adopted = true
      await this.sync(client)
    } catch (err) {
      client.removeAllListeners('end')
      // Lost meanwhile (a stall, an error): lost() has already scheduled the next session, which must be left alone.
      if (adopted && this.client !== client) return
      if (!this.stopped)
        this.logger.warn({ err }, 'pgonce: cache listener could not start; answering from Postgres until it does')
      this.client = null
      this.lease.detach(client)
      this.syncedNow = false
      await client.end().catch(() => {})
      this.scheduleReconnect()
      return
    }
    if (this.client !== client) return
    this.retryMs = FIRST_RETRY_MS
    clearInterval(this.pollTimer)
    this.pollTimer = setInterval(() => this.resync(), POLL_MS)
    this.pollTimer.unref?.()
  }

  private notified(rest: string): void {
    if (rest === '*') {
      // Every bucket was bumped (invalidate_cache): nothing is answered from Redis until the new epochs are read.
      this.resync(true)
      return
    }
    const [bucket, epoch] = rest.split(' ').map(Number) as [number, number]
    if (!(bucket >= 0 && bucket < BUCKETS) || !Number.isFinite(epoch)) return
    this.learn(bucket, epoch)
    // Others may not have heard yet (their NOTIFY is on its way): the epoch key tells their next pre-check.
    if (this.toCopy.size === 0) setImmediate(() => this.copyHeard())
    this.toCopy.set(bucket, Math.max(epoch, this.toCopy.get(bucket) ?? 0))
  }

  private copyHeard(): void {
    const heard = [...this.toCopy]
    this.toCopy.clear()
    void this.gate.run(
      'raise epochs',
      () =>
        raiseEpochs(
          this.redis,
          heard.map(([b]) => this.names.epoch(b)),
          heard.map(([, e]) => e),
        ),
      BACKGROUND_TIMEOUT_MS,
    )
  }

  /** Reads every epoch again: after a '!cache *' (`unsync`: answers from Redis stop until it is done), and on the poll. */
  private resync(unsync = false): void {
    const client = this.client
    if (client === null) return
    if (unsync) this.syncedNow = false
    if (this.syncing !== null) {
      this.resyncWanted = true
      return
    }
    this.sync(client).catch((err: Error) => {
      this.logger.warn({ err }, 'pgonce: cache listener could not read the epochs; reconnecting')
      this.lost(client, err)
    })
  }

  /** Syncs on `client`, again while a resync was asked meanwhile; a sync of a session since replaced changes nothing. */
  private async sync(client: pg.Client): Promise<void> {
    const syncing = (async () => {
      await this.syncOnce(client)
      while (this.resyncWanted && this.client === client) {
        this.resyncWanted = false
        await this.syncOnce(client)
      }
    })()
    this.syncing = syncing
    try {
      await syncing
    } finally {
      if (this.syncing === syncing) this.syncing = null
    }
  }

  private async syncOnce(client: pg.Client): Promise<void> {
    if (!(await this.probe.hears())) {
      if (this.client !== client) return
      this.syncedNow = false
      this.logger.error(
        { channel: this.channel },
        'pgonce: the cache listener does not hear NOTIFYs sent from other connections ' +
          '(a transaction-mode pooler?); answering from Postgres only (docs/redis.md)',
      )
      this.scheduleResync(PROBE_RETRY_MS)
      return
    }
    for (let round = 0; ; round++) {
      if (this.client !== client) return
      // What Redis and this process knew, read before Postgres: a bump committed meanwhile cannot look like a step back.
      const seen = this.known.slice()
      const stored = await this.gate.run(
        'read epoch keys',
        () => this.redis.mget(this.names.server(), ...this.known.map((_, b) => this.names.epoch(b))),
        BACKGROUND_TIMEOUT_MS,
      )
      if (stored === FAILED) {
        // Redis cannot be read (so nothing can be answered from it): try again shortly.
        this.syncedNow = false
        this.scheduleResync(RETRY_MS)
        return
      }
      const sent = this.clock.mark()
      const { rows } = await client.query<EpochRow>(sqlFor('cache-epochs', this.schema), [null])
      const first = rows[0]
      if (first === undefined || rows.length !== BUCKETS)
        throw new Error(`pgonce: ${this.schema}.cache_epochs has ${rows.length} rows, not ${BUCKETS}`)
      this.clock.sample(sent, first.now_ms)
      const started = String(first.server_started_ms)
      // A server started anew since this process or Redis saw it (a restart, a failover, a restore), unless Redis has
      // the new start already: whoever wrote it there bumped every epoch before.
      const mark = stored[0] ?? null
      const restarted =
        round === 0 &&
        mark !== started &&
        (mark !== null || (this.serverStarted !== null && this.serverStarted !== started))
      let floor = 0
      let wentBack = false
      for (const r of rows) {
        const highest = Math.max(seen[r.bucket] as number, Number(stored[r.bucket + 1] ?? 0))
        floor = Math.max(floor, highest)
        if (Number(r.epoch) < highest) wentBack = true
      }
      if (this.client !== client) return
      if (restarted || wentBack) {
        this.syncedNow = false
        if (wentBack && (round > 0 || Date.now() - this.invalidatedAt < INVALIDATE_EVERY_MS)) {
          // Epochs that keep going back: two databases sharing this Redis namespace, or a bug. Nothing from Redis meanwhile.
          this.logger.error(
            { floor },
            'pgonce: cache epochs in Postgres keep falling behind those in Redis; not using Redis for a minute',
          )
          this.scheduleResync(INVALIDATE_EVERY_MS)
          return
        }
        this.logger.info(
          { serverStarted: started, floor },
          'pgonce: new server or restored database; bumping every cache epoch',
        )
        this.invalidatedAt = Date.now()
        await client.query(sqlFor('cache-invalidate', this.schema), [floor])
        continue
      }
      for (const r of rows) this.known[r.bucket] = Math.max(this.known[r.bucket] as number, Number(r.epoch))
      this.serverStarted = started
      // For the others (their next pre-check sees these epochs); this process's own reads do not depend on it.
      await this.gate.run(
        'copy epochs',
        () =>
          Promise.all([
            this.redis.set(this.names.server(), started),
            raiseEpochs(
              this.redis,
              rows.map((r) => this.names.epoch(r.bucket)),
              rows.map((r) => Number(r.epoch)),
            ),
          ]),
        BACKGROUND_TIMEOUT_MS,
      )
      this.syncedNow = this.client === client
      // Every bump committed before `sent` is in what was read, and the later ones come by NOTIFY on the listener's session.
      if (this.syncedNow) this.lease.synced(client, sent)
      return
    }
  }

  private scheduleResync(ms: number): void {
    clearTimeout(this.reconnectTimer)
    this.reconnectTimer = setTimeout(() => this.resync(), ms)
    this.reconnectTimer.unref?.()
  }

  private lost(client: pg.Client, err: Error | undefined): void {
    const current = this.client
    if (current === null || client !== current || this.stopped) return
    this.client = null
    this.syncedNow = false
    this.lease.detach(client)
    this.logger.warn(
      { err },
      'pgonce: cache listener lost its connection; answering from Postgres until it is back and synced',
    )
    void current.end().catch(() => {})
    clearInterval(this.pollTimer)
    this.scheduleReconnect()
  }

  /** The session stopped delivering (its heartbeat unheard for STALL_MS, e.g. a frozen backend): a new one replaces it. */
  private stalled(client: pg.Client): void {
    this.lost(client, new Error(`pgonce: the cache listener's heartbeat went unheard for ${STALL_MS} ms`))
  }

  private scheduleReconnect(): void {
    if (this.stopped) return
    clearTimeout(this.reconnectTimer)
    this.reconnectTimer = setTimeout(() => void this.connect(), this.retryMs)
    this.reconnectTimer.unref?.()
    this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS)
  }
}
