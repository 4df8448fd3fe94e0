// Opens (or adopts) the pg Pool behind a Queue, Worker, Effects or migrate call, with bounded waits (docs/operations.md, "Bounded waits").

import type pg from 'pg'
import type { Logger } from '../logger.js'
import { checkInteger, fail } from '../validate.js'
import { PgoncePool } from './pool.js'

/** How pgonce reaches Postgres: a connection string (pgonce owns the pool) or your pool. */
export interface ConnectionOptions {
  /** A libpq connection string; pgonce opens and closes its own pool. */
  connectionString?: string
  /** Your `pg.Pool`; pgonce never ends it. Its own settings bound its waits (set `connectionTimeoutMillis` and `query_timeout` on it). */
  pool?: pg.Pool
  /**
   * How long pgonce waits for a connection to open, or for a free one of its pool, in ms; then the call fails with a
   * `DatabaseTimeoutError`. Not with `pool`. (Default: 10000)
   */
  connectTimeoutMs?: number
  /**
   * The server's `statement_timeout` and `idle_in_transaction_session_timeout` on pgonce's connections, in ms (sent as
   * the connection's `options`; a connection string's own `options` replace them). A statement the server does not even
   * stop is given up 2 s later (`DatabaseTimeoutError`) and its connection dropped. Not with `pool`. (Default: 30000)
   */
  statementTimeoutMs?: number
}

/** The names of the options above, for the option checks of everything that takes them. */
export const CONNECTION_OPTION_KEYS = ['connectionString', 'pool', 'connectTimeoutMs', 'statementTimeoutMs'] as const

export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000
/** How much longer than the statement timeout pgonce waits for an answer: the server's own cancel should come first. */
export const ANSWER_GRACE_MS = 2_000
/** Longest delay a Node timer accepts. */
export const MAX_TIMER_MS = 2_147_483_647

/** How long pgonce waits: for a connection, and for a statement's answer. */
export interface Bounds {
  connectMs: number
  answerMs: number
}

export interface PoolHandle {
  pool: pg.Pool
  /** The pool pgonce created and must end, or null for yours. */
  owned: PgoncePool | null
  bounds: Bounds
}

/** Checks the options above (fields named `options.…`) and opens or adopts the pool. */
export function openPool(opts: ConnectionOptions, logger: Logger, max = 10): PoolHandle {
  if ((opts.connectionString === undefined) === (opts.pool === undefined)) {
    fail('CONFLICTING_OPTIONS', 'options.connectionString', 'give exactly one of connectionString and pool')
  }
  const connectMs =
    opts.connectTimeoutMs === undefined
      ? DEFAULT_CONNECT_TIMEOUT_MS
      : checkInteger(opts.connectTimeoutMs, 'options.connectTimeoutMs', 1, MAX_TIMER_MS)
  const statementMs =
    opts.statementTimeoutMs === undefined
      ? DEFAULT_STATEMENT_TIMEOUT_MS
      : checkInteger(opts.statementTimeoutMs, 'options.statementTimeoutMs', 1, MAX_TIMER_MS - ANSWER_GRACE_MS)
  const bounds = { connectMs, answerMs: statementMs + ANSWER_GRACE_MS }
  if (opts.pool !== undefined) {
    if (typeof opts.pool !== 'object' || opts.pool === null || typeof opts.pool.connect !== 'function') {
      fail('INVALID_TYPE', 'options.pool', 'must be a pg.Pool')
    }
    for (const key of ['connectTimeoutMs', 'statementTimeoutMs'] as const) {
      if (opts[key] !== undefined)
        fail(
          'CONFLICTING_OPTIONS',
          `options.${key}`,
          'applies to the pool pgonce opens: set connectionTimeoutMillis, query_timeout and statement_timeout on your pool instead',
        )
    }
    return { pool: opts.pool, owned: null, bounds }
  }
  if (typeof opts.connectionString !== 'string' || opts.connectionString.length === 0) {
    fail('INVALID_TYPE', 'options.connectionString', 'must be a non-empty string')
  }
  const pool = new PgoncePool({
    connectionString: opts.connectionString,
    max,
    connectionTimeoutMillis: connectMs,
    query_timeout: bounds.answerMs,
    // PGOPTIONS last: settings of the environment win over pgonce's defaults, as a connection string's options do.
    options: [
      `-c statement_timeout=${statementMs}`,
      `-c idle_in_transaction_session_timeout=${statementMs}`,
      process.env.PGOPTIONS,
    ]
      .filter((o) => o !== undefined && o !== '')
      .join(' '),
  })
  // An idle client dropped by the server must not crash the process. pg-pool puts the client on the error (its password
  // non-enumerable, but shown by util.inspect with showHidden): the log line carries the error only.
  pool.on('error', (err) => {
    delete (err as { client?: unknown }).client
    logger.warn({ err }, 'pgonce: idle connection error')
  })
  return { pool, owned: pool, bounds }
}
