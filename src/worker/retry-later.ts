// RetryLaterError: thrown by a handler (or by ctx.runOnce) to run the job again later without counting the attempt.

/**
 * Throw it from a handler to put the job back in the queue for `delayMs`
 * without using up an attempt (e.g. the work is running elsewhere). The
 * worker does the same when `ctx.runOnce` finds the key `duplicate-running`.
 * Unbounded by `attempts`: use it for conditions that clear by themselves.
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
