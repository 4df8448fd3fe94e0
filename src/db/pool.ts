// The pg Pool pgonce opens from a connection string (its connections PgonceClients), and closing anything of pgonce's within a bound.

import pg from 'pg'
import { GOODBYE_MS, PgonceClient, serverOf } from './client.js'
import { type ErrorContext, databaseError } from './database-errors.js'

/**
 * A pg.Pool whose checkouts fail with pgonce's errors (a connect or a wait for a free connection that ran out of
 * `connectionTimeoutMillis` is a DatabaseTimeoutError naming the server), and that can drop all its connections at
 * once (`abandon`), the ones still connecting included.
 */
export class PgoncePool extends pg.Pool {
  private readonly members: Set<PgonceClient>
  private readonly context: ErrorContext
  private endingOnce: Promise<void> | undefined

  constructor(config: pg.PoolConfig) {
    const members = new Set<PgonceClient>()
    class Member extends PgonceClient {
      constructor(options: pg.ClientConfig) {
        super(options)
        members.add(this)
        this.once('end', () => members.delete(this))
      }
    }
    super({ ...config, Client: Member as unknown as pg.PoolConfig['Client'] })
    this.members = members
    this.context = { server: serverOf(config), connectTimeoutMs: config.connectionTimeoutMillis }
  }

  // pg's connect is overloaded: the override takes and returns what pg's does, untyped.
  /* eslint-disable @typescript-eslint/no-explicit-any -- as untyped as pg's overloads */
  override connect(callback?: (...args: any[]) => void): any {
    const base = super.connect as (...args: unknown[]) => any
    if (callback !== undefined) {
      return base.call(this, (err: unknown, ...rest: unknown[]) =>
        callback(err && databaseError(err, this.context), ...rest),
      )
    }
    return (base.call(this) as Promise<unknown>).catch((err: unknown) => {
      throw databaseError(err, this.context)
    })
  }
  /* eslint-enable @typescript-eslint/no-explicit-any */

  /** Ends the pool once (later calls share the first one's promise): no new connection, each one ends when released. */
  override end(): Promise<void> {
    this.endingOnce ??= super.end()
    return this.endingOnce
  }

  /** Ends the pool and drops every connection now: the statements and connects waiting on them fail at once. */
  abandon(): void {
    void this.end().catch(() => {})
    for (const client of this.members) client.drop()
  }
}

/**
 * Runs `close`; if it has not finished within `ms`, calls `abandon` (which drops the connections `close` may be waiting
 * on) and waits at most GOODBYE_MS more: it returns within `ms` plus a second whatever the server does.
 */
export async function closeWithin(ms: number, close: () => Promise<void>, abandon: () => void): Promise<void> {
  const closing = close()
  if (await settlesWithin(closing, ms)) return closing
  abandon()
  if (await settlesWithin(closing, GOODBYE_MS)) return closing
  // Still held (by a handler that keeps a connection, say): nothing waits on it any more.
  closing.catch(() => {})
}

/** True if `promise` settled within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)))
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true,
      ),
      late,
    ])
  } finally {
    clearTimeout(timer)
  }
}
