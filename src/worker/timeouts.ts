// A run's timeout (docs/workers.md, "Timeouts"), the same for a single-job handler and for each job of a batch: the
// timer at the run's deadline, and what happens there.

import { JobTimeoutError } from '../errors.js'
import type { Logger } from '../logger.js'
import type { RunTelemetry } from '../telemetry/run-telemetry.js'
import type { Completer } from './completer.js'
import type { HeldJob } from './context.js'

export class RunTimeouts<Data, Result> {
  constructor(
    private readonly completer: Completer<Data, Result>,
    private readonly reportError: (err: Error) => void,
    private readonly logger: Logger,
  ) {}

  /**
   * A timer at the run's deadline (HeldJob.deadline), if it has one; `recorded` is called once the timed-out attempt
   * is recorded (the runner frees what the run held).
   */
  arm(h: HeldJob<Data>, run: RunTelemetry, recorded: () => void): NodeJS.Timeout | undefined {
    if (h.deadline === null) return undefined
    return setTimeout(() => void this.timedOut(h, run, recorded), Math.max(0, h.deadline - performance.now()))
  }

  /**
   * A timed-out run's handler ended at last (for a batch: it returned, and the job's item settled or was left): what
   * it returned or threw is ignored, its attempt being recorded. The runner settles the job.
   */
  endedAfterTimeout(h: HeldJob<Data>, err: Error | undefined): void {
    this.logger.debug(
      { jobId: h.id, err },
      'pgonce: the handler of a timed-out job ended; its outcome is ignored (the timeout was recorded)',
    )
  }

  /**
   * The run reached its deadline: `ctx.signal` aborts with JobTimeoutError and the attempt is failed with it (retried
   * or failed for good, sql/fail-job.sql). The job stays held until its handler ends, so that close() waits for it and
   * names it; its completion would be refused anyway (sql/complete-jobs.sql, past timeout_at). Not when the run's
   * outcome is decided already: a ctx.transaction committing (the database decides), a lost lease, close() gave up on
   * it, the handler ended. The run's span and duration end here, with the error.
   */
  private async timedOut(h: HeldJob<Data>, run: RunTelemetry, recorded: () => void): Promise<void> {
    if (h.phase !== 'running' || h.completion !== null || h.lost || h.abandoned) return
    const err = (h.timedOut = h.pastDeadline() ?? new JobTimeoutError(h.id, h.timeoutMs as number))
    h.phase = 'settling'
    h.abort(err)
    run.end(err)
    this.logger.warn({ jobId: h.id, timeoutMs: h.timeoutMs }, 'pgonce: job timed out; its handler is aborted')
    await this.completer.threw(h, err).catch(this.reportError)
    recorded()
  }
}
