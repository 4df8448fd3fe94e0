// The cache listener's two leases (docs/redis.md): Redis is trusted only while its LISTEN session has heard, within TRUST_MS, a heartbeat NOTIFY sent from pgonce's pool, and while its row in cache_listeners lasts.

import { randomBytes } from 'node:crypto'
import type pg from 'pg'
import type { Execute } from '../db/executor.js'
import { sqlFor } from '../db/sql-files.js'
import type { Logger } from '../logger.js'
import { localNow } from './db-clock.js'

/**
 * How long a heartbeat heard back is trusted, from just before it was sent. PostgreSQL delivers the NOTIFYs of
 * different transactions in commit order, so hearing one sent at t proves every NOTIFY committed before t was heard.
 * A change that ends a cached fact and cannot raise its epoch in Redis waits the settle interval (the
 * same 100 ms) after its commit: by then every process has heard it, or stopped answering from Redis.
 */
export const TRUST_MS = 100
/** A heartbeat is sent this often while pre-checks ask (trust stays continuous while a round trip takes under 75 ms). */
const HEARTBEAT_EVERY_MS = 25
/** Heartbeats stop after this long without a pre-check; the next one asks Postgres and starts them again. */
const IDLE_MS = 10_000
/** A heartbeat committed and not heard this long after: the session stopped delivering (a frozen backend), and is replaced. */
export const STALL_MS = 2_000
/** The row in cache_listeners is written for this long, and renewed every RENEW_EVERY_MS. */
const LEASE_MS = 30_000
const RENEW_EVERY_MS = 10_000
/** Slack for two clocks' rates (100 ppm, far above NTP-disciplined clocks): 1 ms over the trust, 1 s over the row. */
const TRUST_SLACK_MS = 1
const LEASE_SLACK_MS = 1_000
/** How long stop() waits for the row's deletion (it expires by itself anyway). */
const UNREGISTER_WAIT_MS = 1_000

/**
 * The proof that this process still hears every bump: a heartbeat NOTIFY on a channel of its own, sent from pgonce's
 * pool every HEARTBEAT_EVERY_MS while pre-checks ask and heard on the LISTEN session, and its row in cache_listeners,
 * which makes removals that Redis never hears of wait for it (docs/redis.md). One per EpochListener; it follows the
 * listener's sessions.
 *
 * Sent from the pool, not on the LISTEN session: a transaction that NOTIFYs holds one lock of the whole database while
 * it commits, and a frozen backend caught holding it would stop every NOTIFY (every bump, every worker's wake-up).
 * The LISTEN session only reads.
 */
export class ListenerLease {
  /** This listener's row in cache_listeners. */
  readonly id: string
  /** The heartbeat's channel, which only this listener LISTENs to. */
  readonly channel: string
  private client: pg.Client | null = null
  private heardUntil = 0
  private leaseUntil = 0
  /** The heartbeat in flight: when it was sent, and when its NOTIFY had committed (null: not yet). */
  private beating: { payload: string; sentAt: number; committedAt: number | null } | null = null
  private sequence = 0
  private usedAt = 0
  private beat: NodeJS.Timeout | undefined
  private renewal: NodeJS.Timeout | undefined

  constructor(
    private readonly schema: string,
    /** pgonce's pool, which sends the heartbeats. */
    private readonly pool: Execute,
    /** Called with a session whose heartbeat went unheard for STALL_MS. */
    private readonly stalled: (client: pg.Client) => void,
    private readonly logger: Logger,
  ) {
    const tag = randomBytes(8).toString('hex')
    this.id = `${schema} ${process.pid} ${tag}`
    this.channel = `pgonce-cache-heartbeat:${tag}`
  }

  /** True while both leases last: a heartbeat heard within TRUST_MS, and the row in cache_listeners. */
  trusted(): boolean {
    const now = localNow()
    return now < this.heardUntil && now < this.leaseUntil
  }

  /** A pre-check asked: heartbeats go on (or start again) while they do. */
  touch(): void {
    this.usedAt = localNow()
    if (this.beat === undefined && this.client !== null) {
      this.beat = setInterval(() => this.tick(), HEARTBEAT_EVERY_MS)
      this.beat.unref?.()
    }
  }

  /** Writes (or renews) the row in cache_listeners on `client`, before the session takes the listener slot. */
  async register(client: pg.Client): Promise<void> {
    const sentAt = localNow()
    await client.query(sqlFor('cache-register', this.schema), [this.id, LEASE_MS])
    this.leaseUntil = Math.max(this.leaseUntil, sentAt + LEASE_MS - LEASE_SLACK_MS)
  }

  /**
   * `client` has read every epoch with a statement sent at `sentAt` (so it knows every bump committed before), and
   * hears the later ones: trust it from then, and keep renewing its row.
   */
  synced(client: pg.Client, sentAt: number): void {
    if (this.client !== client) {
      this.detach()
      this.client = client
      this.renewal = setInterval(
        () =>
          void this.register(client).catch((err: Error) =>
            this.logger.debug({ err }, 'pgonce: cache listener could not renew its lease'),
          ),
        RENEW_EVERY_MS,
      )
      this.renewal.unref?.()
    }
    this.heard(sentAt)
  }

  /** A NOTIFY on this listener's heartbeat channel. */
  notified(payload: string | undefined): void {
    const beating = this.beating
    if (beating === null || payload !== beating.payload) return
    this.beating = null
    this.heard(beating.sentAt)
  }

  /** The session is gone (or stopped): nothing is trusted until a new one has synced. */
  detach(client: pg.Client | null = this.client): void {
    if (client !== this.client) return
    this.client = null
    this.heardUntil = 0
    this.beating = null
    clearInterval(this.beat)
    clearInterval(this.renewal)
    this.beat = undefined
    this.renewal = undefined
  }

  /** Stopped for good: the row goes, so that removals stop waiting for this process (bounded; it expires anyway). */
  async unregister(execute: Execute): Promise<void> {
    this.detach()
    if (this.leaseUntil === 0) return
    this.leaseUntil = 0
    const gone = execute(sqlFor('cache-unregister', this.schema), [this.id]).catch((err: Error) =>
      this.logger.debug({ err }, 'pgonce: cache listener could not delete its lease; it expires by itself'),
    )
    let timer: NodeJS.Timeout | undefined
    await Promise.race([gone, new Promise((r) => (timer = setTimeout(r, UNREGISTER_WAIT_MS)))])
    clearTimeout(timer)
  }

  private heard(sentAt: number): void {
    this.heardUntil = Math.max(this.heardUntil, sentAt + TRUST_MS - TRUST_SLACK_MS)
  }

  private tick(): void {
    const client = this.client
    const now = localNow()
    if (client === null || (this.beating === null && now - this.usedAt > IDLE_MS)) {
      clearInterval(this.beat)
      this.beat = undefined
      return
    }
    const beating = this.beating
    if (beating !== null) {
      // Only a NOTIFY that committed and went unheard says the session is stuck (not a busy pool or database); one
      // that has not committed for as long is given up, and another one sent.
      if (beating.committedAt !== null && now - beating.committedAt > STALL_MS) this.stalled(client)
      if (beating.committedAt !== null || now - beating.sentAt <= STALL_MS) return
    }
    const sent = { payload: String(++this.sequence), sentAt: localNow(), committedAt: null as number | null }
    this.beating = sent
    this.pool(sqlFor('cache-heartbeat', this.schema), [this.channel, sent.payload]).then(
      () => (sent.committedAt = localNow()),
      // Not sent: the next tick sends another (trust runs out meanwhile).
      () => {
        if (this.beating === sent) this.beating = null
      },
    )
  }
}
