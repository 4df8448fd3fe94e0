// One dedicated LISTEN connection per worker: wake-ups by NOTIFY, reconnected with backoff when it dies.

import pg from 'pg'
import type { Logger } from '../logger.js'

export interface NotifierEvents {
  /** A NOTIFY arrived on the channel; `payload` is the queue name. */
  onNotify(payload: string): void
  /** The connection was replaced after it died: notifications may have been missed, so poll once. */
  onReconnect(): void
}

const FIRST_RETRY_MS = 50
const MAX_RETRY_MS = 5_000

export class Notifier {
  private client: pg.Client | null = null
  /** Whether the live connection holds the session advisory lock `aliveKey`. */
  private holdsAliveKey = false
  private retryMs = FIRST_RETRY_MS
  private timer: NodeJS.Timeout | undefined
  private stopped = false
  private connecting: Promise<boolean> | undefined

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channel: string,
    private readonly events: NotifierEvents,
    private readonly logger: Logger,
    /** A session advisory lock the connection holds while it lives: others test it to know this listener is alive. */
    private readonly aliveKey: string,
  ) {}

  /** The advisory-lock key held by the live LISTEN connection, null while it is down (or the key was taken). */
  get heldAliveKey(): string | null {
    return this.client !== null && this.holdsAliveKey ? this.aliveKey : null
  }

  /** The backend pid of the live LISTEN connection, if any (for inspection and tests). */
  get pid(): number | null {
    return (this.client as unknown as { processID?: number } | null)?.processID ?? null
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

  private connect(): Promise<boolean> {
    this.connecting = (async () => {
      const client = new pg.Client(this.config)
      client.on('error', (err) => this.lost(client, err))
      client.on('end', () => this.lost(client, undefined))
      client.on('notification', (msg) => {
        if (msg.channel === this.channel) this.events.onNotify(msg.payload ?? '')
      })
      try {
        await client.connect()
        // The channel comes from an allow-listed schema name; quoted because it contains ':'.
        // One round trip for both; the key is a bigint this process generated (BigInt#toString), safe to inline.
        const results = await client.query(`listen "${this.channel}"; select pg_try_advisory_lock(${BigInt(this.aliveKey)}::bigint) as locked`)
        const lock = (results as unknown as pg.QueryResult<{ locked: boolean }>[])[1]
        this.holdsAliveKey = lock?.rows[0]?.locked === true
      } catch (err) {
        this.logger.warn({ err }, 'pgonce: LISTEN connection failed; polling until it is back')
        client.removeAllListeners('end')
        client.on('error', () => {})
        await client.end().catch(() => {})
        return false
      }
      if (this.stopped) {
        await client.end().catch(() => {})
        return false
      }
      this.client = client
      this.retryMs = FIRST_RETRY_MS
      return true
    })()
    return this.connecting
  }

  private lost(client: pg.Client, err: Error | undefined): void {
    if (client !== this.client || this.stopped) return
    this.client = null
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
