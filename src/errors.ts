// Error classes with stable codes, thrown by pgonce's public API.

/** Why an input was rejected; stable across releases. */
export type ValidationCode =
  | 'REQUIRED'
  | 'INVALID_TYPE'
  | 'EMPTY'
  | 'TOO_LONG'
  | 'NUL_BYTE'
  | 'LONE_SURROGATE'
  | 'NOT_INTEGER'
  | 'OUT_OF_RANGE'
  | 'NOT_JSON'
  | 'TOO_LARGE'
  | 'TOO_DEEP'
  | 'UNKNOWN_OPTION'
  | 'INVALID_IDENTIFIER'
  | 'CONFLICTING_OPTIONS'
  | 'DEPENDENCY_NOT_FOUND'

/** Bad input, rejected before any I/O (except `DEPENDENCY_NOT_FOUND`, which needs a lookup and writes nothing). */
export class ValidationError extends Error {
  override readonly name = 'ValidationError'
  constructor(
    /** Stable machine-readable reason. */
    readonly code: ValidationCode,
    /** The option or argument at fault, e.g. `opts.deduplication.ttl` or `items[3].data`. */
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`)
  }
}

export type DeduplicationCode = 'EXTEND_NOT_PENDING' | 'REPLACE_HAS_DEPENDENTS'

/** A deduplication strategy could not be applied; nothing was written. */
export class DeduplicationError extends Error {
  override readonly name = 'DeduplicationError'
  constructor(
    readonly code: DeduplicationCode,
    /** The dedup key concerned. */
    readonly key: string,
    /** `job.id` of the key's current owner. */
    readonly ownerId: string | null,
    message: string,
  ) {
    super(message)
  }
}

/** Which server setting (or cancel request) stopped a statement: SQLSTATE 55P03 or 57014. */
export type QueryTimeoutCode = '55P03' | '57014'

/**
 * A pgonce statement was stopped by the server before it finished: `lock_timeout` (SQLSTATE 55P03, another session
 * held a row or key it needed) or `statement_timeout` (57014; also a `pg_cancel_backend`). The statement changed
 * nothing: retry the call. Inside your `tx`, your transaction is aborted by it and must be rolled back.
 */
export class QueryTimeoutError extends Error {
  override readonly name = 'QueryTimeoutError'
  constructor(
    /** The SQLSTATE: '55P03' (lock_timeout) or '57014' (statement_timeout, or a cancel request). */
    readonly code: QueryTimeoutCode,
    /** The statement's name (e.g. `add-job`), or `sql` when it had none. */
    readonly statement: string,
    /** The driver's error. */
    override readonly cause: unknown,
  ) {
    super(
      `pgonce: statement ${statement} was stopped by ${code === '55P03' ? 'lock_timeout' : 'statement_timeout (or a cancel request)'} ` +
        `(SQLSTATE ${code}); nothing it would have written was written: ${(cause as Error)?.message ?? String(cause)}`,
    )
  }
}

/** What pgonce waited for too long: a new connection, a free one of its pool, or a statement's answer. */
export type DatabaseTimeoutCode = 'CONNECT_TIMEOUT' | 'POOL_TIMEOUT' | 'ANSWER_TIMEOUT'

/**
 * pgonce gave up waiting for the database (docs/operations.md, "Bounded waits"): no connection within
 * `connectTimeoutMs` (`CONNECT_TIMEOUT`), every connection of its pool busy for that long (`POOL_TIMEOUT`), or no
 * answer to a statement within `statementTimeoutMs` and its grace (`ANSWER_TIMEOUT`: the server did not even stop the
 * statement, so it may still have been written; the connection is dropped). Retry the call: a jobId or a dedup key
 * makes a retried add safe.
 */
export class DatabaseTimeoutError extends Error {
  override readonly name = 'DatabaseTimeoutError'
  constructor(
    readonly code: DatabaseTimeoutCode,
    /** The server waited for, `host:port` (never a connection string). */
    readonly server: string,
    /** The bound that ran out, in ms. */
    readonly timeoutMs: number,
    /** The statement (its sql/ file's name) whose answer did not come, or null. */
    readonly statement: string | null,
    /** The driver's error. */
    override readonly cause: unknown,
  ) {
    super(
      `pgonce: ${server} ${
        code === 'CONNECT_TIMEOUT'
          ? 'did not accept a connection'
          : code === 'POOL_TIMEOUT'
            ? 'kept every connection of the pool busy'
            : `did not answer statement ${statement ?? 'sql'}`
      } ` +
        `within ${timeoutMs} ms (${code === 'ANSWER_TIMEOUT' ? 'statementTimeoutMs and its grace; whether it was written is unknown' : 'connectTimeoutMs'})`,
    )
  }
}

/** Which part of pgonce's set-up the database refused. */
export type SetupCode = 'PREPARED_STATEMENTS' | 'NOT_MIGRATED' | 'STARTUP_PARAMETER' | 'LISTEN_UNHEARD'

/**
 * The database refused pgonce because of how it is set up, not because of the call; `fix` names the option or command
 * that mends it: named prepared statements behind a transaction-mode pooler (`PREPARED_STATEMENTS`), a schema not
 * migrated with `migrate: false` (`NOT_MIGRATED`), a pooler refusing the session settings pgonce sends at connect
 * (`STARTUP_PARAMETER`), a LISTEN connection that hears no NOTIFY (`LISTEN_UNHEARD`, a Worker's `'error'` event).
 */
export class SetupError extends Error {
  override readonly name = 'SetupError'
  constructor(
    readonly code: SetupCode,
    /** What to change. */
    readonly fix: string,
    /** The SQLSTATE of the database's refusal, or null. */
    readonly sqlstate: string | null,
    /** The driver's error, if there was one. */
    override readonly cause: unknown,
    what: string,
  ) {
    super(`pgonce: ${what}; ${fix}`)
  }
}

/**
 * The schema holds migrations this version of pgonce does not ship: a newer pgonce migrated it. Thrown by `migrate()`
 * (and so by a Queue, Worker or Effects migrating on first use) before it applies anything, since an older version's
 * statements may call functions those migrations changed. Run one version per schema at a time
 * (docs/operations.md, "Upgrading pgonce").
 */
export class SchemaNewerError extends Error {
  override readonly name = 'SchemaNewerError'
  constructor(
    readonly schema: string,
    /** The migrations' filenames this version does not know, in order. */
    readonly unknownMigrations: readonly string[],
  ) {
    super(
      `pgonce: schema ${schema} was migrated by a newer pgonce (migrations this version does not ship: ` +
        `${unknownMigrations.join(', ')}); run one version per schema at a time: upgrade this process, or stop it`,
    )
  }
}

/**
 * The schema was migrated with a history of migrations this version does not continue: a migration it recorded has
 * the number of one this version ships but another name or hash. A schema migrated before pgonce's migrations were
 * replaced by one baseline (`000001-schema.sql` and on) is one. No upgrade path leads from it: drop the schema and
 * migrate again (docs/sql-and-migrations.md, "Migrations"). Thrown by `migrate()`, and so by a Queue, Worker or
 * Effects migrating on first use, before it applies anything.
 */
export class SchemaHistoryError extends Error {
  override readonly name = 'SchemaHistoryError'
  constructor(
    readonly schema: string,
    /** The recorded migrations' filenames from the first that differs from the one this version ships on, in order. */
    readonly divergedMigrations: readonly string[],
  ) {
    const list =
      divergedMigrations.length > 3
        ? `${divergedMigrations[0]}, …, ${divergedMigrations.at(-1)} (${divergedMigrations.length} migrations)`
        : divergedMigrations.join(', ')
    super(
      `pgonce: schema ${schema} was migrated with a migration history this version does not continue (${list}): ` +
        `pgonce's migrations before its first release were replaced by one baseline, and no upgrade leads from them. ` +
        `Drop the schema (drop schema "${schema}" cascade: its jobs go with it) and migrate again`,
    )
  }
}

/** The lease of a running job was taken over (expired and rescued, or the job was changed by hand). */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError'
  constructor(readonly jobId: string) {
    super(`lease of job ${jobId} was lost: another worker or an operator took it over`)
  }
}

/** The job was cancelled (`queue.cancelJob`) while its handler ran: whatever the handler does now, it ends cancelled. */
export class JobCancelledError extends Error {
  override readonly name = 'JobCancelledError'
  constructor(readonly jobId: string) {
    super(`job ${jobId} was cancelled`)
  }
}

/**
 * The run went past its timeout (the job's `timeoutMs`, else the Worker's): `ctx.signal` aborts with it, and the attempt
 * fails with it (retried after the job's backoff, or failed after the last attempt). Whatever the handler does after,
 * its job's completion is refused (docs/workers.md#timeouts).
 */
export class JobTimeoutError extends Error {
  override readonly name = 'JobTimeoutError'
  constructor(
    readonly jobId: string,
    /** The run's timeout, in ms. */
    readonly timeoutMs: number,
  ) {
    super(`pgonce: job ${jobId} timed out after ${timeoutMs} ms`)
  }
}

/**
 * `queue.waitForJob(id, { timeoutMs })` saw no terminal state of job `jobId` within `timeoutMs`. The job goes on (it may
 * still end later): wait again, or read it with `queue.getJob`.
 */
export class WaitForJobTimeoutError extends Error {
  override readonly name = 'WaitForJobTimeoutError'
  constructor(
    readonly jobId: string,
    /** The wait's timeout, in ms. */
    readonly timeoutMs: number,
    /** The job's state when last read, or null when it was never read (the first read had not answered). */
    readonly lastState: string | null,
  ) {
    super(
      `pgonce: job ${jobId} did not reach a terminal state within ${timeoutMs} ms` +
        (lastState === null ? '' : ` (it was ${lastState} when last read)`),
    )
  }
}

/** Why `queue.waitForJob` gave up other than by its timeout; stable across releases. */
export type WaitForJobCode = 'NOT_FOUND' | 'QUEUE_CLOSED'

/**
 * `queue.waitForJob` cannot wait: there is no job `jobId` in this queue (never was, or it was removed or pruned while
 * waited for: `NOT_FOUND`), or the Queue was closed while it waited (`QUEUE_CLOSED`).
 */
export class WaitForJobError extends Error {
  override readonly name = 'WaitForJobError'
  constructor(
    readonly code: WaitForJobCode,
    readonly jobId: string,
    /** The queue waited on. */
    readonly queue: string,
  ) {
    super(
      code === 'NOT_FOUND'
        ? `pgonce: queue ${queue} has no job ${jobId} to wait for (never added, removed, or pruned by retention)`
        : `pgonce: queue ${queue} was closed while waiting for job ${jobId}`,
    )
  }
}

/**
 * Throw it from a handler to put the job back in the queue for `delayMs` without using up an attempt (e.g. the work is
 * running elsewhere). The worker does the same when `ctx.runOnce` finds the key `duplicate-running`. Unbounded by
 * `attempts`: use it for conditions that clear by themselves.
 */
export class RetryLaterError extends Error {
  override readonly name = 'RetryLaterError'
  constructor(
    /** How long the job waits before it may run again, in ms (database clock). */
    readonly delayMs: number,
    message = `retry in ${delayMs} ms`,
  ) {
    super(message)
  }
}

/** @internal What a handler threw, as an Error: a thrown non-Error is described in the message. */
export function handlerError(value: unknown): Error {
  if (value instanceof Error) return value
  let text: string
  try {
    text = JSON.stringify(value) ?? String(value)
  } catch {
    text = String(value)
  }
  return new Error(`handler threw a non-Error: ${text}`)
}
