// Opens (or adopts) the pg Pool behind a Queue, Worker, Effects or migrate call.

import pg from 'pg'
import type { Logger } from '../logger.js'
import { fail } from '../validate.js'

/** How pgonce reaches Postgres: a connection string (pgonce owns the pool) or your pool. */
export interface ConnectionOptions {
  /** A libpq connection string; pgonce opens and closes its own pool. */
  connectionString?: string
  /** Your `pg.Pool`; pgonce never ends it. */
  pool?: pg.Pool
}

export interface PoolHandle {
  pool: pg.Pool
  /** True when pgonce created the pool and must end it. */
  owned: boolean
}

/** Checks `connectionString`/`pool` (fields named `options.…`) and opens or adopts the pool. */
export function openPool(opts: ConnectionOptions, logger: Logger, max = 10): PoolHandle {
  if ((opts.connectionString === undefined) === (opts.pool === undefined)) {
    fail('CONFLICTING_OPTIONS', 'options.connectionString', 'give exactly one of connectionString and pool')
  }
  if (opts.pool !== undefined) {
    if (typeof opts.pool !== 'object' || opts.pool === null || typeof opts.pool.connect !== 'function') {
      fail('INVALID_TYPE', 'options.pool', 'must be a pg.Pool')
    }
    return { pool: opts.pool, owned: false }
  }
  if (typeof opts.connectionString !== 'string' || opts.connectionString.length === 0) {
    fail('INVALID_TYPE', 'options.connectionString', 'must be a non-empty string')
  }
  const pool = new pg.Pool({ connectionString: opts.connectionString, max })
  // An idle client dropped by the server must not crash the process. pg-pool puts the client on the error (its password
  // non-enumerable, but shown by util.inspect with showHidden): the log line carries the error only.
  pool.on('error', (err) => {
    delete (err as { client?: unknown }).client
    logger.warn({ err }, 'pgonce: idle connection error')
  })
  return { pool, owned: true }
}
