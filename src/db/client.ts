// The pg Client behind every connection pgonce opens: errors translated, a statement left unanswered drops its connection, and end() never waits on a silent server.

/* eslint-disable @typescript-eslint/no-explicit-any -- pg's methods are overloaded: the overrides take and return what pg's do */
import pg from 'pg'
import { type ErrorContext, databaseError } from './database-errors.js'

/** How long end() waits for the server to close the connection after pgonce said goodbye, before dropping it. */
export const GOODBYE_MS = 1_000

/** `host:port` of a connection config, as pg resolves it (its environment variables included); no I/O. */
export function serverOf(config: pg.ClientConfig): string {
  const client = new pg.Client(config)
  return `${client.host}:${client.port}`
}

type Callback = (...args: any[]) => void

/**
 * A pg.Client whose errors come out as pgonce's (src/db/database-errors.ts). Its bounds are pg's own settings:
 * `connectionTimeoutMillis` for the connect, `query_timeout` for each answer. When an answer does not come, the
 * connection is in an unknown state (the statement may still run, or commit): it is ended, its socket destroyed, and
 * the statements queued behind fail at once instead of each waiting out its own bound.
 */
export class PgonceClient extends pg.Client {
  private readonly context: ErrorContext

  constructor(config: pg.ClientConfig) {
    super(config)
    this.context = {
      server: `${this.host}:${this.port}`,
      connectTimeoutMs: config.connectionTimeoutMillis,
      answerTimeoutMs: config.query_timeout,
    }
  }

  // pg's methods are overloaded: the overrides take and return what pg's do, untyped.
  override connect(callback?: Callback): any {
    const base = super.connect as (...args: unknown[]) => any
    if (callback !== undefined)
      return base.call(this, (err: unknown, ...rest: unknown[]) => callback(err && this.translate(err), ...rest))
    return (base.call(this) as Promise<unknown>).catch((err: unknown) => {
      throw this.translate(err)
    })
  }

  override query<R extends pg.QueryResultRow = any>(
    text: string | pg.QueryConfig,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>>
  override query(...args: any[]): any
  override query(...args: any[]): any {
    const base = super.query as (...args: unknown[]) => any
    const first = args[0] as { submit?: unknown; text?: unknown; callback?: unknown } | string | null | undefined
    // A cursor or stream (a Submittable), or a config carrying its own callback: pg's, as it is.
    if (
      typeof first === 'object' &&
      first !== null &&
      (typeof first.submit === 'function' || typeof first.callback === 'function')
    ) {
      return base.apply(this, args)
    }
    const text = typeof first === 'string' ? first : typeof first?.text === 'string' ? first.text : undefined
    const answerMs = typeof first === 'object' ? (first as { query_timeout?: number } | null)?.query_timeout : undefined
    const last = args.length - 1
    const callback = args[last] as unknown
    if (typeof callback === 'function') {
      args[last] = (err: unknown, ...rest: unknown[]) =>
        (callback as Callback)(err && this.translate(err, text, answerMs), ...rest)
      return base.apply(this, args)
    }
    return (base.apply(this, args) as Promise<unknown>).catch((err: unknown) => {
      throw this.translate(err, text, answerMs)
    })
  }

  /** Ends the connection; if the server has not closed it GOODBYE_MS after pgonce's goodbye, drops it. */
  override end(): Promise<void>
  override end(callback: Callback): void
  override end(callback?: Callback): Promise<void> | void {
    const timer = setTimeout(() => this.drop(), GOODBYE_MS)
    timer.unref()
    this.once('end', () => clearTimeout(timer))
    const base = super.end as (...args: unknown[]) => any
    return callback === undefined
      ? (base.call(this) as Promise<void>).finally(() => clearTimeout(timer))
      : (base.call(this, callback) as void)
  }

  /** Destroys the socket now: whatever waits on this connection fails at once (a connect too). */
  drop(): void {
    this.connection.stream.destroy()
  }

  private translate(err: unknown, text?: string, answerMs?: number): unknown {
    const typed = databaseError(err, {
      ...this.context,
      text,
      answerTimeoutMs: answerMs ?? this.context.answerTimeoutMs,
    })
    if ((typed as { code?: unknown }).code === 'ANSWER_TIMEOUT') void this.end()
    return typed
  }
}
