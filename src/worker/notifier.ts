// One dedicated LISTEN connection per worker: wake-ups by NOTIFY, the idle slot that asks adds to send them, reconnection with backoff.

import pg from 'pg'
import { prepareListenSession } from '../db/listen-config.js'
import { sqlFor } from '../db/sql-files.js'
import type { Logger } from '../logger.js'

export interface NotifierEvents {
  /** A NOTIFY arrived on the channel. */
  onNotify(payload: string): void
  /** The connection was replaced after it died: notifications may have been missed (claim once). */
  onReconnect(): void
  /** The connection failed or dropped (reported once per outage). */
  onError(err: Error): void
}

const FIRST_RETRY_MS = 50
const MAX_RETRY_MS = 5_000

/** An idle slot held: its number. */
interface Slot {
  slot: number
}

/**
 * The LISTEN connection. Besides LISTEN it holds, while the worker sleeps, one of the queue's four idle slots (a session
 * advisory lock): an add NOTIFYs only while some slot is held, so a sleeping worker must hold one to be woken.
 * Dropping the connection drops the slot; after a reconnect the worker advertises again when it next sleeps.
 */
export class Notifier {
  private client: pg.Client | null = null
  private retryMs = FIRST_RETRY_MS
  private timer: NodeJS.Timeout | undefined
  private stopped = false
  private connecting: Promise<boolean> | undefined
  /** The idle slot held, or a request for one in flight. */
  private slot: Promise<Slot | null> | null = null
  private failing = false

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channel: string,
    private readonly schema: string,
    private readonly queue: string,
    private readonly events: NotifierEvents,
    private readonly logger: Logger,
  ) {}

  /** The backend pid of the live LISTEN connection, if any (for inspection and tests). */
  get pid(): number | null {
    return (this.client as unknown as { processID?: number } | null)?.processID ?? null
  }

  /** True while the connection is up: a sleeping worker can count on NOTIFY. */
  get listening(): boolean {
    return this.client !== null
  }

  /** Connects and LISTENs; on failure keeps retrying in the background (the worker polls meanwhile). */
  async start(): Promise<void> {
    if (!(await this.connect())) this.scheduleReconnect()
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.connecting
    const client = this.client
    this.client = null
    await client?.end().catch(() => {})
  }

  /**
   * Takes an idle slot unless one is held: adds to the queue NOTIFY from now on. True when this call took it (an add
   * committed just before sent no NOTIFY: the caller claims once more); false when one was held already, or none could
   * be taken (all four held by other workers, whose NOTIFYs reach this one too; or no connection).
   */
  async advertise(): Promise<boolean> {
    const client = this.client
    if (client === null || this.slot !== null) return false
    const taking = client.query<Slot>(sqlFor('take-idle-slot', this.schema), [this.queue])
      .then((r) => r.rows[0] ?? null, () => null)
    this.slot = taking
    const slot = await taking
    if (slot === null && this.slot === taking) this.slot = null
    return slot !== null && this.slot === taking
  }

  /** Gives the idle slot back (the worker is busy: it claims again on its own). */
  withdraw(): void {
    const held = this.slot
    const client = this.client
    this.slot = null
    if (held === null || client === null) return
    void held.then((held) => {
      if (held !== null && client === this.client) {
        client.query(sqlFor('release-idle-slot', this.schema), [this.queue, held.slot]).catch(() => {})
      }
    })
  }

  private connect(): Promise<boolean> {
    this.connecting = (async () => {
      const client = new pg.Client(this.config)
      // Every connection pgonce opens has an 'error' listener for its whole life: a terminated backend is reported, never thrown.
      client.on('error', (err) => this.lost(client, err))
      client.on('end', () => this.lost(client, undefined))
      client.on('notification', (msg) => {
        if (msg.channel === this.channel) this.events.onNotify(msg.payload ?? '')
      })
      try {
        await client.connect()
        // pg lets a connection string's own parameters win over the config, application_name included: the session
        // names itself ('pgonce-listener <worker id>' whatever the string says) and sets the server's keepalives.
        await prepareListenSession(client, this.schema, this.config.application_name ?? null)
        // The channel comes from an allow-listed schema name; quoted because it contains ':'.
        await client.query(`listen "${this.channel}"`)
      } catch (err) {
        if (!this.failing) {
          this.failing = true
          this.events.onError(err as Error)
        }
        this.logger.warn({ err }, 'pgonce: LISTEN connection failed; polling until it is back')
        client.removeAllListeners('end')
        await client.end().catch(() => {})
        return false
      }
      if (this.stopped) {
        await client.end().catch(() => {})
        return false
      }
      this.client = client
      this.slot = null
      this.failing = false
      this.retryMs = FIRST_RETRY_MS
      return true
    })()
    return this.connecting
  }

  private lost(client: pg.Client, err: Error | undefined): void {
    if (client !== this.client || this.stopped) return
    this.client = null
    this.slot = null
    this.logger.warn({ err }, 'pgonce: LISTEN connection lost; reconnecting')
    client.end().catch(() => {})
    this.scheduleReconnect()
  }

  private scheduleReconnect(): void {
    if (this.stopped) return
    clearTimeout(this.timer)
    this.timer = setTimeout(async () => {
      if (this.stopped) return
      if (await this.connect()) {
        this.logger.info('pgonce: LISTEN connection restored')
        this.events.onReconnect()
      } else {
        this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS)
        this.scheduleReconnect()
      }
    }, this.retryMs)
    this.timer.unref?.()
  }
}
