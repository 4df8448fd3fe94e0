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
