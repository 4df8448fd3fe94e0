// The settings of a dedicated LISTEN connection (a Worker's notifier, the Redis layer's epoch listener).

import type pg from 'pg'

/**
 * The pool's own settings (or `connectionString` when the connection must go elsewhere, e.g. straight to PostgreSQL
 * past a transaction-mode pooler), named `applicationName`, with keepalives so that a silently dropped connection is
 * noticed.
 */
export function listenConfig(pool: pg.Pool, connectionString: string | null, applicationName: string): pg.ClientConfig {
  return {
    connectionTimeoutMillis: 10_000,
    ...(connectionString === null ? (pool as unknown as { options: pg.ClientConfig }).options : { connectionString }),
    application_name: applicationName,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  }
}
