// The LISTEN connection behind a Queue's waitForJob calls: one per Queue, opened while some call waits, reconnected when lost.

import type pg from 'pg'
import { PgonceClient } from './db/client.js'
import { prepareListenSession } from './db/listen-config.js'
import { NotifyProbe, PROBE_RETRY_MS, PROBE_WAIT_MS } from './db/notify-probe.js'
import type { Logger } from './logger.js'

const FIRST_RETRY_MS = 50
const MAX_RETRY_MS = 5_000

export interface WaitListenerEvents {
  /** A job's id arrived on the waiters channel: a job someone waits for has ended. */
  onNotify(id: string): void
  /** The connection came back after an outage: ends committed meanwhile went unheard (read every waited job again). */
  onReconnect(): void
}

/**
 * LISTENs on the schema's waiters channel (`<channel>:done`, where the jobs_waited trigger NOTIFYs). Every wait polls
 * too, so this connection only makes waits end sooner: when it fails, drops or hears nothing (a transaction-mode
 * pooler between it and PostgreSQL), waits end on the next poll, and it reconnects in the background with a backoff.
 * Its connect and every statement are bounded by the config (src/db/listen-config.ts).
 */
export class WaitListener {
  /** Settles once the first attempt to LISTEN ended, heard or not: the waits read their jobs after it. */
  readonly ready: Promise<void>
  #client: PgonceClient | null = null
  #opening: PgonceClient | null = null
  #stopped = false
  #retryMs = FIRST_RETRY_MS
  #timer: NodeJS.Timeout | undefined
  /** Whether the current outage was logged (once per outage). */
  #warned = false
  readonly #probe: NotifyProbe

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channel: string,
    private readonly schema: string,
    private readonly events: WaitListenerEvents,
    private readonly logger: Logger,
    /** Sends a NOTIFY on the waiters channel from the Queue's pool (sql/wait-probe.sql). */
    sendProbe: (payload: string) => Promise<unknown>,
  ) {
    this.#probe = new NotifyProbe('!probe ', sendProbe)
    this.ready = this.#connect().then((ok) => {
      if (!ok) this.#scheduleReconnect()
    })
  }

  /** Ends the connection (no call waits any more, or the Queue closes). */
  async stop(): Promise<void> {
    this.#stopped = true
    clearTimeout(this.#timer)
    this.#opening?.drop()
    const client = this.#client
    this.#client = null
    await client?.end().catch(() => {})
  }

  async #connect(): Promise<boolean> {
    const client = new PgonceClient(this.config)
    this.#opening = client
    // An 'error' listener for the connection's whole life: a terminated backend is handled, never thrown.
    client.on('error', (err) => this.#lost(client, err))
    client.on('end', () => this.#lost(client, undefined))
    client.on('notification', (msg) => {
      const payload = msg.payload ?? ''
      if (msg.channel === this.channel && !this.#probe.heard(payload)) this.events.onNotify(payload)
    })
    try {
      await client.connect()
      await prepareListenSession(client, this.schema, this.config.application_name ?? null)
      // The channel comes from an allow-listed schema name; quoted because it contains ':'.
      await client.query(`listen "${this.channel}"`)
    } catch (err) {
      this.#warn(err as Error, 'pgonce: waitForJob could not LISTEN; its waits poll (waitPollIntervalMs) until it can')
      client.removeAllListeners('end')
      await client.end().catch(() => {})
      return false
    } finally {
      this.#opening = null
    }
    if (this.#stopped) {
      await client.end().catch(() => {})
      return false
    }
    this.#client = client
    this.#retryMs = FIRST_RETRY_MS
    this.#warned = false
    void this.#checkHearing(client)
    return true
  }

  /** A LISTEN behind a transaction-mode pooler hears nothing: such a connection is closed and tried again later. */
  async #checkHearing(client: PgonceClient): Promise<void> {
    const heard = await this.#probe.hears().catch(() => true)
    if (heard || client !== this.#client || this.#stopped) return
    this.#client = null
    this.#warn(
      null,
      `pgonce: waitForJob's LISTEN connection heard no NOTIFY within ${PROBE_WAIT_MS} ms (a transaction-mode ` +
        "pooler?): its waits poll (waitPollIntervalMs); point the Queue's listenConnectionString at PostgreSQL itself",
    )
    client.removeAllListeners('end')
    await client.end().catch(() => {})
    this.#retryMs = PROBE_RETRY_MS
    this.#scheduleReconnect()
  }

  #lost(client: PgonceClient, err: Error | undefined): void {
    if (client !== this.#client || this.#stopped) return
    this.#client = null
    this.#warn(err ?? null, 'pgonce: waitForJob lost its LISTEN connection; reconnecting, polling meanwhile')
    client.end().catch(() => {})
    this.#scheduleReconnect()
  }

  #warn(err: Error | null, message: string): void {
    if (this.#warned || this.#stopped) return
    this.#warned = true
    this.logger.warn(err === null ? {} : { err }, message)
  }

  #scheduleReconnect(): void {
    if (this.#stopped) return
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => void this.#reconnect(), this.#retryMs)
    this.#timer.unref()
  }

  async #reconnect(): Promise<void> {
    if (this.#stopped) return
    if (await this.#connect()) {
      this.logger.info('pgonce: waitForJob LISTEN connection restored')
      this.events.onReconnect()
    } else {
      this.#retryMs = Math.min(this.#retryMs * 2, Math.max(MAX_RETRY_MS, this.#retryMs))
      this.#scheduleReconnect()
    }
  }
}
