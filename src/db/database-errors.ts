// Turns the driver's errors into pgonce's typed ones, in one place: each says what the database (or the wait for it) did, and what fixes it.

import { DatabaseTimeoutError, QueryTimeoutError, SetupError } from '../errors.js'
import { statementOf } from './sql-files.js'

/** Where an error came from: the statement's text, and the server and bounds of the connection (pgonce's own ones). */
export interface ErrorContext {
  text?: string | undefined
  /** `host:port`; unknown for a connection of yours. */
  server?: string | undefined
  connectTimeoutMs?: number | undefined
  answerTimeoutMs?: number | undefined
}

/** pg's own messages for its client-side bounds (pg and pg-pool 8.x / 3.x). */
const ANSWER_TIMEOUT = 'Query read timeout'
const CONNECT_TIMEOUTS = new Set(['timeout expired', 'Connection terminated due to connection timeout'])
const POOL_TIMEOUT = 'timeout exceeded when trying to connect'

/** SQLSTATEs of a missing schema, table or function. */
const MISSING = new Set(['3F000', '42P01', '42883'])

/**
 * The error to throw for `err`: a bound that ran out as a DatabaseTimeoutError, a statement the server stopped as a
 * QueryTimeoutError, a refusal caused by pgonce's set-up as a SetupError naming the fix; anything else as it is. A
 * pgonce error passes through unchanged, so that a call translated twice says the same.
 */
export function databaseError(err: unknown, context: ErrorContext): unknown {
  if (
    !(err instanceof Error) ||
    err instanceof DatabaseTimeoutError ||
    err instanceof SetupError ||
    err instanceof QueryTimeoutError
  )
    return err
  const { server, text } = context
  const statement = statementOf(text)
  if (server !== undefined) {
    if (err.message === ANSWER_TIMEOUT) {
      return new DatabaseTimeoutError(
        'ANSWER_TIMEOUT',
        server,
        context.answerTimeoutMs ?? 0,
        statement?.name ?? null,
        err,
      )
    }
    // pg-pool wraps its client's error: the client's may be translated already.
    if (CONNECT_TIMEOUTS.has(err.message)) {
      return err.cause instanceof DatabaseTimeoutError
        ? err.cause
        : new DatabaseTimeoutError('CONNECT_TIMEOUT', server, context.connectTimeoutMs ?? 0, null, err)
    }
    if (err.message === POOL_TIMEOUT)
      return new DatabaseTimeoutError('POOL_TIMEOUT', server, context.connectTimeoutMs ?? 0, null, err)
  }
  const code = (err as { code?: unknown }).code
  const sqlstate = typeof code === 'string' ? code : null
  // Named pgonce_<hash> by src/db/prepared.ts: a pooler handed the statement to another server connection.
  if (/prepared statement "pgonce_[0-9a-f]+"/.test(err.message)) {
    return new SetupError(
      'PREPARED_STATEMENTS',
      'pass `preparedStatements: false` behind a transaction-mode pooler such as PgBouncer before 1.21 (docs/operations.md, "PgBouncer in transaction mode")',
      sqlstate,
      err,
      `a named prepared statement of pgonce did not survive the hop between two server sessions (${err.message})`,
    )
  }
  if (/unsupported startup parameter/.test(err.message)) {
    return new SetupError(
      'STARTUP_PARAMETER',
      'add `options` to the pooler\'s ignore_startup_parameters: pgonce sends its statementTimeoutMs there (docs/operations.md, "Bounded waits")',
      sqlstate,
      err,
      `the server refused a session setting pgonce sends at connect (${err.message})`,
    )
  }
  if (statement === null || sqlstate === null) return err
  if (sqlstate === '55P03' || sqlstate === '57014') return new QueryTimeoutError(sqlstate, statement.name, err)
  if (MISSING.has(sqlstate) && new RegExp(`(^|[\\s"(])${statement.schema}[".]`).test(err.message)) {
    const s = statement.schema
    return new SetupError(
      'NOT_MIGRATED',
      `run \`npx pgonce migrate --schema ${s}\` or \`migrate({ schema: '${s}', … })\`, or leave \`migrate\` at its default (true) so that pgonce migrates on first use`,
      sqlstate,
      err,
      `schema ${s} is missing or not migrated (${err.message})`,
    )
  }
  return err
}
