// Runs claimed jobs in batches on a batch handler: how many to claim (what the forming batch lacks), the wait to fill a
// batch, the handler with one outcome per job, and the wait for running batches at close.

import { LeaseLostError, handlerError } from '../errors.js'
import { Job, type JobOwner } from '../job.js'
import type { Logger } from '../logger.js'
import { RunTelemetry } from '../telemetry/run-telemetry.js'
import { type BatchHandler, BatchRun, type ResolvedBatchOptions, type Settled, settleOutcomes } from './batch.js'
import type { Completer } from './completer.js'
import { type ContextServices, HeldJob } from './context.js'
import { HeldJobs } from './held-jobs.js'
import { type FetchedRow, claimedToJobRow } from './job-store.js'
import type { Leases } from './leases.js'
import type { Runner } from './runner.js'
import { RunTimeouts } from './timeouts.js'

/** What the Worker and its Fetcher ask of whichever runner it has: the single-job Runner or the BatchRunner. */
export type JobRunner<Data, Result> = Pick<
  Runner<Data, Result>,
  'demand' | 'claimed' | 'freed' | 'refuseNewStarts' | 'stop' | 'finish'
>

/**
 * A batch's life:
 *
 *   forming ──(size reached, waitMs passed, or waitMs 0)──> running ──(handler returned or threw)──> writing ──> gone
 *      └──(close)──> given back, not run
 *
 * A job of a running batch past its deadline (timeouts.ts) has its attempt failed at once and leaves the batch's
 * outcomes: its item is no longer waited for, and what the handler says of it is ignored. Once every job of the batch
 * timed out, the batch's ctx.signal aborts and its slot frees; its jobs stay held until the handler ends (close()).
 *
 * A worker claims only what it starts (docs/workers.md, "Fetching"): a claim asks for what the forming batch lacks,
 * and only while fewer than `concurrency` batches run, so every claimed job is bound for the next batch to start. While
 * a batch forms (waitMs > 0), its jobs are held like any claimed job: the heartbeat (leases.ts) renews their leases, and
 * the Fetcher claims again when NOTIFY, a settle poll or the poll says more may be due. Before the handler starts, a
 * job whose lease is more than half spent is renewed first, and one lost meanwhile is left out of the batch.
 *
 * Outcomes are written per job by the Completer's fenced statements, exactly as for single jobs: the failures first
 * (the batch's slot frees once they are recorded, so that the next claim can find the retried jobs), then the
 * completions, batched into one statement, in the background. A new batch is claimed only while at most `concurrency`
 * batches are writing theirs, so that held jobs stay bounded when completions are slower than handlers.
 */
export class BatchRunner<Data, Result> implements JobRunner<Data, Result> {
  /** Claimed jobs of the next batch. */
  private forming: HeldJob<Data>[] = []
  private formTimer: NodeJS.Timeout | undefined
  /** Batches whose handler runs (or whose leases are being renewed before it starts). */
  private readonly running = new Set<BatchRun<Data>>()
  private runningCount = 0
  /** Batches whose completions are being written (their slot is free). */
  private writing = 0
  private accepting = true
  private readonly held: HeldJobs<Data>
  private readonly timeouts: RunTimeouts<Data, Result>

  constructor(
    private readonly handler: BatchHandler<Data, Result>,
    private readonly batch: ResolvedBatchOptions,
    private readonly concurrency: number,
    private readonly services: ContextServices,
    private readonly leases: Leases<Data>,
    private readonly completer: Completer<Data, Result>,
    private readonly owner: JobOwner,
    private readonly reportError: (err: Error) => void,
    private readonly logger: Logger,
    /** Every job claimed and not yet settled, by lock token (shared with the heartbeat). */
    held: Map<string, HeldJob<Data>>,
  ) {
    this.held = new HeldJobs(held, services.store, reportError, logger)
    this.timeouts = new RunTimeouts(completer, reportError, logger)
  }

  /** How many jobs the next claim asks for: what the forming batch lacks, while a batch slot is free (0: none now). */
  demand(): number {
    if (!this.accepting || this.runningCount >= this.concurrency || this.writing > this.concurrency) return 0
    return this.batch.size - this.forming.length
  }

  /** A claim returned `rows`: they join the forming batch, which runs when full, at once (waitMs 0), or after waitMs. */
  claimed(rows: readonly FetchedRow[], _limit: number, sentAt: number, _latencyMs: number): void {
    for (const row of rows) {
      const h = new HeldJob<Data>(row, new Job<Data>(claimedToJobRow(row), null, this.owner), this.services, sentAt)
      this.held.add(h)
      this.forming.push(h)
    }
    if (this.forming.length === 0 || !this.accepting) return
    if (this.forming.length >= this.batch.size || this.batch.waitMs === 0) this.dispatch()
    else this.formTimer ??= setTimeout(() => this.dispatch(), this.batch.waitMs)
  }

  /** Resolves when a batch slot frees or a job leaves the worker: the fetcher may claim again. */
  freed(): Promise<void> {
    return this.held.freed()
  }

  /** Closing: jobs a claim still returns are held, not started, until `stop()` gives them back. */
  refuseNewStarts(): void {
    this.accepting = false
  }

  /** Stops starting batches; the forming one goes back to the queue, its runs not counted. */
  async stop(): Promise<void> {
    this.accepting = false
    clearTimeout(this.formTimer)
    this.formTimer = undefined
    await this.held.giveBack(this.forming.splice(0))
  }

  /**
   * Waits up to `closeTimeoutMs` for the running batches and their outcomes; then aborts the batches still running
   * (`ctx.signal` and every job's own signal), and gives those that honour it a moment to throw.
   */
  async finish(closeTimeoutMs: number): Promise<void> {
    if (await this.held.allSettled(closeTimeoutMs)) return
    const reason = new Error('pgonce: worker closed before the batch finished')
    for (const run of this.running) run.abort(reason)
    this.held.abandonRunning('batches')
    await this.held.allSettled(Math.min(1_000, Math.max(100, closeTimeoutMs / 10)))
  }

  private dispatch(): void {
    clearTimeout(this.formTimer)
    this.formTimer = undefined
    if (!this.accepting || this.forming.length === 0) return
    this.runningCount++
    void this.execute(this.forming.splice(0))
  }

  private async execute(claimed: HeldJob<Data>[]): Promise<void> {
    // A batch that waited to fill, or a process that stopped: renew the leases more than half spent before the start,
    // all in one heartbeat (per job only for what that one did not renew, e.g. when a heartbeat was in flight).
    if (claimed.some((h) => this.leases.stale(h))) await this.leases.beat()
    const fresh = await Promise.all(
      claimed.map(async (h) => !this.leases.stale(h) || (await this.leases.renewBeforeStart(h))),
    )
    const hs = claimed.filter((h, i) => fresh[i] && !h.lost && this.accepting)
    const started = new Set(hs)
    for (const h of claimed) if (!started.has(h)) this.notRun(h)
    if (hs.length === 0) return this.slotFreed()
    const run = new BatchRun<Data>(hs, this.logger)
    this.running.add(run)
    const telemetry = hs.map((h) => {
      h.phase = 'running'
      this.leases.watch(h)
      const { queue, name, run_at_ms: runAtMs, trace_context: traceContext } = h.row
      return new RunTelemetry(queue, { id: h.id, name, attempts: h.job.attempts, runAtMs, traceContext })
    })
    // The slot frees once, when the outcomes' failures are recorded, or earlier once every job's timeout is.
    let slotHeld = true
    const freeSlot = () => {
      if (slotHeld) this.slotFreed()
      slotHeld = false
    }
    const timers = hs.map((h, i) =>
      this.timeouts.arm(h, telemetry[i]!, () => {
        if (!hs.every((j) => j.timedOut !== null)) return
        run.abort(h.timedOut as Error)
        freeSlot()
      }),
    )
    let settled: Settled<Result>[]
    try {
      settled = await settleOutcomes(
        await this.handler(
          hs.map((h) => h.job),
          run,
        ),
        hs.length,
        hs.map((h) => (h.deadline === null ? undefined : timedOut(h))),
      )
    } catch (thrown) {
      const err = handlerError(thrown)
      settled = hs.map(() => ({ ok: false, err }))
    }
    for (const timer of timers) clearTimeout(timer)
    this.running.delete(run)
    // A job that timed out meanwhile has its attempt recorded: what the handler says of it is ignored.
    const live = hs.flatMap((h, i) => {
      const s = settled[i]!
      if (h.timedOut === null) return [{ h, s, t: telemetry[i]! }]
      this.timeouts.endedAfterTimeout(h, s.ok ? undefined : s.err)
      this.held.settled(h)
      return []
    })
    for (const { h, s, t } of live) {
      t.end(s.ok ? undefined : s.err)
      h.phase = 'settling'
    }
    await this.writeOutcomes(
      live.map((l) => l.h),
      live.map((l) => l.s),
      freeSlot,
    )
  }

  /** Failures first, then the slot frees, then the completions (one statement for the batch: Completer). */
  private async writeOutcomes(hs: HeldJob<Data>[], settled: Settled<Result>[], freeSlot: () => void): Promise<void> {
    const written = (h: HeldJob<Data>) => (p: Promise<void>) =>
      p.catch(this.reportError).then(() => this.held.settled(h))
    const failures = hs.flatMap((h, i) => {
      const s = settled[i]!
      return s.ok ? [] : [written(h)(this.completer.threw(h, s.err))]
    })
    await Promise.all(failures)
    this.writing++
    freeSlot()
    const completions = hs.flatMap((h, i) => {
      const s = settled[i]!
      return s.ok ? [written(h)(this.completer.succeeded(h, s.value))] : []
    })
    await Promise.all(completions)
    this.writing--
    this.held.notifyFreed()
  }

  private slotFreed(): void {
    this.runningCount--
    this.held.notifyFreed()
  }

  /** A job left out of its batch: lost (reported), given back while closing, or its renewal failed (rescued later). */
  private notRun(h: HeldJob<Data>): void {
    if (!h.lost && !this.accepting) return void this.held.giveBack([h])
    if (h.lost) {
      this.logger.warn({ jobId: h.id }, 'pgonce: lease lost before the batch started; the job is not run here')
      this.reportError(new LeaseLostError(h.id))
    }
    this.held.settled(h)
  }
}

/** Resolves with the job's JobTimeoutError when its run times out (timeouts.ts sets it before it aborts the signal). */
function timedOut<Data>(h: HeldJob<Data>): Promise<Error> {
  return new Promise((resolve) => {
    if (h.timedOut !== null) return resolve(h.timedOut)
    h.signal.addEventListener('abort', () => {
      if (h.timedOut !== null) resolve(h.timedOut)
    })
  })
}
