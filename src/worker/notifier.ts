// One dedicated LISTEN connection per worker (or per process, shared: shared-listener.ts): wake-ups by NOTIFY, the idle
// slots that ask adds to send them, reconnection with backoff.

import type pg from 'pg'
import { PgonceClient } from '../db/client.js'
import { prepareListenSession } from '../db/listen-config.js'
import { NotifyProbe, PROBE_RETRY_MS, PROBE_WAIT_MS } from '../db/notify-probe.js'
import { sqlFor } from '../db/sql-files.js'
import { SetupError } from '../errors.js'
import type { Logger } from '../logger.js'

export interface NotifierEvents {
  /** A NOTIFY arrived on the channel. */
  onNotify(payload: string): void
  /** The connection was replaced after it died: notifications may have been missed (claim once). */
  onReconnect(): void
  /** The connection failed, dropped, or hears no NOTIFY (reported once per outage, and once more if its cause changes). */
  onError(err: Error): void
}

const FIRST_RETRY_MS = 50
const MAX_RETRY_MS = 5_000
/**
 * How often the LISTEN connection must answer a `select 1` (within connectTimeoutMs). Idle, it sends nothing: behind a
 * proxy gone silent it would look alive forever, while its server session keeps the idle slot and adds NOTIFY it in
 * vain. A ping that goes unanswered drops it, and the worker reconnects.
 */
const PING_MS = 5_000

/** An idle slot held: its number. */
interface Slot {
  slot: number
}

/**
 * The LISTEN connection. Besides LISTEN it holds, while the worker sleeps, one of the queue's four idle slots (a session
 * advisory lock): an add NOTIFYs only while some slot is held, so a sleeping worker must hold one to be woken.
 * Dropping the connection drops the slot; after a reconnect the worker advertises again when it next sleeps. Shared by
 * the Workers of a process, it holds at most one slot per queue (`queue` names the slot taken by default).
 */
export class Notifier {
  private client: PgonceClient | null = null
  /** The connection being opened, if any (stop() drops it). */
  private opening: PgonceClient | null = null
  private retryMs = FIRST_RETRY_MS
  private timer: NodeJS.Timeout | undefined
  private pingTimer: NodeJS.Timeout | undefined
  private stopped = false
  private connecting: Promise<boolean> | undefined
  /** Per queue: the idle slot held, or a request for one in flight. */
  private readonly slots = new Map<string, Promise<Slot | null>>()
  /** The statements on the connection, one after another (a shared connection takes several queues' slots at once). */
  private serial: Promise<unknown> = Promise.resolve()
  /** What the current outage was reported as, null while the connection is up. */
  private reported: 'failed' | 'unheard' | null = null
  private readonly probe: NotifyProbe

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channel: string,
    private readonly schema: string,
    private readonly queue: string,
    private readonly events: NotifierEvents,
    private readonly logger: Logger,
    /** Sends a NOTIFY from the worker's pool (the probe that the LISTEN connection hears what adds send). */
    notifyFromPool: (payload: string) => Promise<unknown>,
  ) {
    this.probe = new NotifyProbe('!probe ', notifyFromPool)
  }

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
    clearInterval(this.pingTimer)
    this.opening?.drop()
    await this.connecting
    const client = this.client
    this.client = null
    await client?.end().catch(() => {})
  }

  /** Drops the connection now, without a goodbye (a close that ran out of time). */
  abandon(): void {
    this.stopped = true
    clearInterval(this.pingTimer)
    this.opening?.drop()
    this.client?.drop()
  }

  /**
   * Takes an idle slot unless one is held: adds to the queue NOTIFY from now on. True when this call took it (an add
   * committed just before sent no NOTIFY: the caller claims once more); false when one was held already, or none could
   * be taken (all four held by other workers, whose NOTIFYs reach this one too; or no connection).
   */
  async advertise(queue = this.queue): Promise<boolean> {
    const client = this.client
    if (client === null || this.slots.has(queue)) return false
    const taking = this.inTurn(() => client.query<Slot>(sqlFor('take-idle-slot', this.schema), [queue])).then(
      (r) => r.rows[0] ?? null,
      () => null,
    )
    this.slots.set(queue, taking)
    const slot = await taking
    if (slot === null && this.slots.get(queue) === taking) this.slots.delete(queue)
    return slot !== null && this.slots.get(queue) === taking
  }

  /** Gives the idle slot back (the worker is busy: it claims again on its own). */
  withdraw(queue = this.queue): void {
    const held = this.slots.get(queue)
    const client = this.client
    this.slots.delete(queue)
    if (held === undefined || client === null) return
    void held.then((held) => {
      if (held !== null && client === this.client) {
        this.inTurn(() => client.query(sqlFor('release-idle-slot', this.schema), [queue, held.slot])).catch(() => {})
      }
    })
  }

  private connect(): Promise<boolean> {
    this.connecting = (async () => {
      const client = new PgonceClient(this.config)
      this.opening = client
      // Every connection pgonce opens has an 'error' listener for its whole life: a terminated backend is reported, never thrown.
      client.on('error', (err) => this.lost(client, err))
      client.on('end', () => this.lost(client, undefined))
      client.on('notification', (msg) => {
        if (msg.channel === this.channel && !this.probe.heard(msg.payload ?? ''))
          this.events.onNotify(msg.payload ?? '')
      })
      try {
        await client.connect()
        // pg lets a connection string's own parameters win over the config, application_name included: the session
        // names itself ('pgonce-listener <worker id>' whatever the string says) and sets the server's keepalives.
        await prepareListenSession(client, this.schema, this.config.application_name ?? null)
        // The channel comes from an allow-listed schema name; quoted because it contains ':'.
        await client.query(`listen "${this.channel}"`)
        // A LISTEN that hears nothing (through a transaction-mode pooler) must not hold an idle slot: adds would NOTIFY
        // it in vain.
        if (!(await this.probe.hears())) throw unheard()
      } catch (err) {
        const kind = err instanceof SetupError ? 'unheard' : 'failed'
        this.report(kind, err as Error)
        if (kind === 'unheard') this.retryMs = PROBE_RETRY_MS
        if (!this.stopped) this.logger.warn({ err }, 'pgonce: LISTEN connection failed; polling until it is back')
        client.removeAllListeners('end')
        await client.end().catch(() => {})
        return false
      } finally {
        this.opening = null
      }
      if (this.stopped) {
        await client.end().catch(() => {})
        return false
      }
      this.client = client
      this.slots.clear()
      this.keepPinging(client)
      this.reported = null
      this.retryMs = FIRST_RETRY_MS
      return true
    })()
    return this.connecting
  }

  private keepPinging(client: PgonceClient): void {
    clearInterval(this.pingTimer)
    this.pingTimer = setInterval(() => {
      if (client !== this.client) return
      // An unanswered ping ends the connection (src/db/client.ts): lost() reconnects.
      this.inTurn(() =>
        client.query({ text: 'select 1', query_timeout: this.config.connectionTimeoutMillis } as pg.QueryConfig),
      ).catch(() => {})
    }, PING_MS)
    this.pingTimer.unref()
  }

  /** Runs `statement` once the statements before it have answered (or failed). */
  private inTurn<T>(statement: () => Promise<T>): Promise<T> {
    const next = this.serial.then(statement, statement)
    this.serial = next.catch(() => {})
    return next
  }

  /** Reports an outage once, and once more when its cause changes (a connection that comes back deaf). */
  private report(kind: 'failed' | 'unheard', err: Error): void {
    if (this.reported === kind || this.stopped) return
    this.reported = kind
    this.events.onError(err)
  }

  private lost(client: PgonceClient, err: Error | undefined): void {
    if (client !== this.client || this.stopped) return
    this.client = null
    this.slots.clear()
    this.logger.warn({ err }, 'pgonce: LISTEN connection lost; reconnecting')
    this.report(
      'failed',
      new Error(
        `pgonce: the LISTEN connection was lost${err === undefined ? '' : ` (${err.message})`}; ` +
          'reconnecting, and polling every pollIntervalMs meanwhile',
        { cause: err },
      ),
    )
    client.end().catch(() => {})
    this.scheduleReconnect()
  }

  private scheduleReconnect(): void {
    if (this.stopped) return
    clearTimeout(this.timer)
    this.timer = setTimeout(() => void this.reconnect(), this.retryMs)
    this.timer.unref?.()
  }

  private async reconnect(): Promise<void> {
    if (this.stopped) return
    if (await this.connect()) {
      this.logger.info('pgonce: LISTEN connection restored')
      this.events.onReconnect()
    } else {
      if (this.reported !== 'unheard') this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS)
      this.scheduleReconnect()
    }
  }
}

/** The error of a LISTEN connection that did not hear its own probe NOTIFY. */
function unheard(): SetupError {
  return new SetupError(
    'LISTEN_UNHEARD',
    "point the Worker's `listenConnectionString` at PostgreSQL itself, past the pooler, or pass " +
      '`listen: false` (docs/operations.md, "PgBouncer in transaction mode")',
    null,
    undefined,
    `the LISTEN connection did not hear a NOTIFY sent from the pool within ${PROBE_WAIT_MS} ms (a transaction-mode pooler ` +
      `between it and PostgreSQL?): no wake-up by NOTIFY; the worker polls every pollIntervalMs, and tries again in ${PROBE_RETRY_MS / 1000} s`,
  )
}
