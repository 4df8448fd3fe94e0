// The settings of a dedicated LISTEN connection (a Worker's notifier, the Redis layer's epoch listener).

import type pg from 'pg'
import { ANSWER_GRACE_MS, DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_STATEMENT_TIMEOUT_MS } from './connection.js'
import { sqlFor } from './sql-files.js'

/**
 * The pool's own settings (or `connectionString` when the connection must go elsewhere, e.g. straight to PostgreSQL
 * past a transaction-mode pooler, with the pool's bounds and session options), named `applicationName`, with
 * keepalives so that a silently dropped connection is noticed, and bounded waits whatever the pool sets: a connect and
 * an answer that never come fail (docs/operations.md, "Bounded waits").
 */
export function listenConfig(pool: pg.Pool, connectionString: string | null, applicationName: string): pg.ClientConfig {
  const options = (pool as unknown as { options: pg.ClientConfig }).options
  return {
    ...(connectionString === null ? options : { connectionString, options: options.options }),
    connectionTimeoutMillis: options.connectionTimeoutMillis || DEFAULT_CONNECT_TIMEOUT_MS,
    query_timeout: options.query_timeout || DEFAULT_STATEMENT_TIMEOUT_MS + ANSWER_GRACE_MS,
    application_name: applicationName,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  }
}

/**
 * The server's TCP keepalives on a LISTEN session: first probe after 10 s idle, then every 5 s, given up after 3
 * unanswered (and after 25 s of unacknowledged data): a vanished peer's session ends within ~25 s. Shorter would end
 * sessions on a network blip (a reconnect, and a claim for the notifications it may have missed); longer keeps a gone
 * worker's idle slot, one of its queue's four, for longer.
 */
const KEEPALIVE = { idleS: '10', intervalS: '5', count: '3', userTimeoutMs: '25000' }

/** Names a LISTEN session (`applicationName`; null: as it is) and sets its server-side keepalives (sql/listen-session.sql). */
export async function prepareListenSession(
  client: pg.Client,
  schema: string,
  applicationName: string | null,
): Promise<void> {
  await client.query(sqlFor('listen-session', schema), [
    applicationName,
    KEEPALIVE.idleS,
    KEEPALIVE.intervalS,
    KEEPALIVE.count,
    KEEPALIVE.userTimeoutMs,
  ])
}
