// Records how each run ended: completed (batched), failed and retried or failed for good, given back for later, cancelled, or lost.

import { Counters } from '../counters.js'
import { LeaseLostError } from '../errors.js'
import { Job, type JobOwner, type JobRow } from '../job.js'
import type { Logger } from '../logger.js'
import { retryDelayMs } from './backoff.js'
import { type HeldJob, resultJson } from './context.js'
import type { JobStore } from './job-store.js'
import type { StepBatcher } from './step-batcher.js'
import { RetryLaterError } from './retry-later.js'
import { countInto } from '../telemetry/metrics.js'

export interface SettlerHost<Data, Result> {
  owner: JobOwner
  completed(job: Job<Data>, result: Result): void
  failed(job: Job<Data>, err: Error): void
  cancelled(job: Job<Data>): void
  reportError(err: Error): void
  /** The job went back to the queue, due in `ms`: this worker may claim it then. */
  requeued(ms: number): void
  /** True once the worker stopped writing outcomes (closed): a handler that finishes now leaves its job to the rescue. */
  closed(): boolean
}

/**
 * How a run ended, as `worker.runOutcomes` counts it: completed; failed (for good) or retried (an attempt failed, one
 * is left); cancelled; rescheduled (RetryLaterError, ctx.runOnce finding the work running elsewhere, or given back at
 * close: the attempt not counted); lease-lost (nothing of the run was recorded).
 */
export type RunOutcome = 'completed' | 'failed' | 'retried' | 'cancelled' | 'rescheduled' | 'lease-lost'

export class Settler<Data, Result> {
  /** How runs ended, also fed to the OpenTelemetry counter pgonce.jobs.runs. */
  readonly outcomes: Counters<RunOutcome>

  constructor(
    private readonly store: JobStore,
    private readonly steps: StepBatcher,
    private readonly host: SettlerHost<Data, Result>,
    private readonly logger: Logger,
    queue: string,
  ) {
    this.outcomes = new Counters<RunOutcome>(countInto('runs', queue))
  }

  /** The handler returned `result`. */
  async succeeded(h: HeldJob<Data>, result: Result): Promise<void> {
    if (this.host.closed()) return this.tooLate(h)
    if (h.completion?.state === 'committed') return this.ended(h, h.completion.ended, h.completion.result as Result)
    if (h.retryLaterMs !== null) return this.releaseLater(h, h.retryLaterMs)
    if (h.lost) return this.leaseLost(h, 'its handler returned')
    const end = await this.steps.complete({ id: h.id, token: h.token, resultJson: resultJson(result, this.logger, h.id) })
    if (end !== null) this.ended(h, end, result)
    else if (!this.steps.stopped) this.leaseLost(h, 'its handler returned')
  }

  /** The handler threw `err`. */
  async threw(h: HeldJob<Data>, err: Error): Promise<void> {
    if (this.host.closed()) return this.tooLate(h)
    if (h.completion?.state === 'committed') {
      this.logger.warn({ err, jobId: h.id }, 'pgonce: handler threw after ctx.transaction completed its job; the job stays completed')
      return this.ended(h, h.completion.ended, h.completion.result as Result)
    }
    if (err instanceof RetryLaterError || h.retryLaterMs !== null) {
      return this.releaseLater(h, h.retryLaterMs ?? (err as RetryLaterError).delayMs)
    }
    if (h.abandoned) return this.releaseLater(h, 0)
    if (h.lost) return this.leaseLost(h, 'its handler threw')
    const delayMs = retryDelayMs(h.job.backoff, h.job.attempts)
    const row = await this.store.fail(h.id, h.token, storableText(err.message || String(err)),
      err.stack === undefined ? null : storableText(err.stack), delayMs)
    if (row === null) return this.leaseLost(h, 'its handler threw')
    this.logger.debug({ jobId: h.id, state: row.state, err }, 'pgonce: attempt failed')
    const job = new Job<Data>(row as JobRow, null, this.host.owner)
    if (row.state === 'cancelled') {
      this.outcomes.increment('cancelled')
      return this.host.cancelled(job)
    }
    if (row.state === 'delayed') this.host.requeued(delayMs)
    else if (row.state === 'waiting') this.host.requeued(0)
    this.outcomes.increment(row.state === 'failed' ? 'failed' : 'retried')
    this.host.failed(job, err)
  }

  /** Puts the job back for `delayMs` without counting the run. */
  private async releaseLater(h: HeldJob<Data>, delayMs: number): Promise<void> {
    const count = await this.store.release([h.id], [h.token], delayMs)
    if (count === 0) return this.leaseLost(h, 'it was to be rescheduled')
    this.logger.debug({ jobId: h.id, delayMs }, 'pgonce: job rescheduled, attempt not counted')
    this.outcomes.increment('rescheduled')
    this.host.requeued(delayMs)
  }

  private ended(h: HeldJob<Data>, end: 'completed' | 'cancelled', result: Result): void {
    this.outcomes.increment(end)
    if (end === 'cancelled') this.host.cancelled(h.job)
    else this.host.completed(h.job, result)
  }

  private tooLate(h: HeldJob<Data>): void {
    this.logger.warn({ jobId: h.id }, 'pgonce: handler finished after close(); its job stays active until its lease expires and is rescued')
  }

  private leaseLost(h: HeldJob<Data>, when: string): void {
    this.logger.warn({ jobId: h.id, when }, 'pgonce: lease lost; the outcome of this run was not recorded')
    this.outcomes.increment('lease-lost')
    this.host.reportError(new LeaseLostError(h.id))
  }
}

/** Postgres text cannot hold NUL characters. */
function storableText(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\\0') : text
}
