// The API's error answers: `{ error: { code, message } }` with the status the code stands for (docs/dashboard.md).

import { DatabaseTimeoutError, QueryTimeoutError, ValidationError } from '../../errors.js'

export type ApiErrorCode =
  'NOT_FOUND' | 'FORBIDDEN' | 'CROSS_SITE' | 'READ_ONLY' | 'BAD_REQUEST' | 'TIMEOUT' | 'CONFLICT' | 'INTERNAL'

export const STATUS: Record<ApiErrorCode, 400 | 403 | 404 | 409 | 500 | 503> = {
  NOT_FOUND: 404,
  FORBIDDEN: 403,
  CROSS_SITE: 403,
  READ_ONLY: 403,
  BAD_REQUEST: 400,
  TIMEOUT: 503,
  CONFLICT: 409,
  INTERNAL: 500,
}

/** An answer the API gives on purpose. */
export class ApiError extends Error {
  constructor(
    readonly code: ApiErrorCode,
    message: string,
    /** The typed error's own code behind a CONFLICT or NOT_FOUND (e.g. RetryJobError's NOT_FAILED). */
    readonly reason?: string,
  ) {
    super(message)
  }

  toJSON(): { code: ApiErrorCode; message: string; reason?: string } {
    return { code: this.code, message: this.message, ...(this.reason === undefined ? {} : { reason: this.reason }) }
  }
}

export const notFound = (what: string) => new ApiError('NOT_FOUND', `${what} not found`)
export const badRequest = (message: string) => new ApiError('BAD_REQUEST', message)

/**
 * What an error becomes on the wire. Bad input names its field; a statement stopped by the statement_timeout or a
 * wait for the database is TIMEOUT; anything else is INTERNAL with a fixed message (the error itself is logged), so
 * that no answer carries a server address, a statement or a secret.
 */
export function toApiError(err: unknown): { error: ApiError; unexpected: boolean } {
  if (err instanceof ApiError) return { error: err, unexpected: false }
  if (err instanceof ValidationError) return { error: new ApiError('BAD_REQUEST', err.message), unexpected: false }
  if (
    err instanceof QueryTimeoutError ||
    err instanceof DatabaseTimeoutError ||
    (err as { code?: unknown } | null)?.code === '57014'
  ) {
    return {
      error: new ApiError('TIMEOUT', 'the database did not answer within the dashboard’s statement timeout'),
      unexpected: true,
    }
  }
  return { error: new ApiError('INTERNAL', 'internal error (logged by the server)'), unexpected: true }
}
