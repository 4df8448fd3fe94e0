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
    super(`pgonce: statement ${statement} was stopped by ${code === '55P03' ? 'lock_timeout' : 'statement_timeout (or a cancel request)'} ` +
      `(SQLSTATE ${code}); nothing it would have written was written: ${(cause as Error)?.message ?? String(cause)}`)
  }
}

/** The error to throw for a driver error: a timeout as a {@link QueryTimeoutError}, anything else as it is. */
export function typedDatabaseError(err: unknown, statement: string): unknown {
  const code = (err as { code?: unknown } | null)?.code
  return code === '55P03' || code === '57014' ? new QueryTimeoutError(code, statement, err) : err
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
    super(`pgonce: schema ${schema} was migrated by a newer pgonce (migrations this version does not ship: ` +
      `${unknownMigrations.join(', ')}); run one version per schema at a time: upgrade this process, or stop it`)
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
