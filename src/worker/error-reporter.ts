// Where a worker's errors go: its 'error' listeners, else its logger, else (no logger given) stderr, rate-limited.

import type { Logger } from '../logger.js'

/** Without a logger and an 'error' listener, at most one stderr line per this many ms (and a count of the rest). */
const STDERR_EVERY_MS = 10_000

/**
 * An error must never crash the process (an 'error' event without a listener would), and must never vanish either: a
 * worker that cannot reach its database would otherwise sit silent. Listeners get every error; without one the logger
 * does (at error level); and when the application gave no logger, stderr does, one line per 10 s at most.
 */
export class ErrorReporter {
  private lastStderrAt = -Infinity
  private suppressed = 0

  constructor(
    /** Emits 'error' if anyone listens; false when nobody does. */
    private readonly emitError: (err: Error) => boolean,
    private readonly logger: Logger,
    private readonly toStderr: boolean,
  ) {}

  report(err: Error): void {
    if (this.emitError(err)) return
    this.logger.error({ err }, 'pgonce: worker error')
    if (!this.toStderr) return
    const now = performance.now()
    if (now - this.lastStderrAt < STDERR_EVERY_MS) {
      this.suppressed++
      return
    }
    const more = this.suppressed > 0 ? ` (and ${this.suppressed} more since the last report)` : ''
    this.lastStderrAt = now
    this.suppressed = 0
    process.stderr.write(
      `pgonce worker error: ${err.message}${more} — listen to 'error' or pass a logger to handle these\n`,
    )
  }
}
