// Holds the jobs a worker claimed, starts them on free handler slots (claimed ones through a fenced start), and runs their handlers.

import { Job, type JobOwner } from '../job.js'
import type { Logger } from '../logger.js'
import { type ContextServices, HeldJob, type JobContext } from './context.js'
import type { Demand } from './fetcher.js'
import { Fifo } from './fifo.js'
import { HeldJobs } from './held-jobs.js'
import { type ClaimedRow, claimedToJobRow } from './job-store.js'
import { Slots } from './slots.js'
import { StartedAhead } from './started-ahead.js'
import type { Settler } from './settler.js'
import type { StepBatcher } from './step-batcher.js'
import { RunTelemetry } from '../telemetry/run-telemetry.js'
import { handlerError } from '../errors.js'

/** Processes one job; its return value is stored as the job's result (JSON). */
export type Handler<Data, Result> = (job: Job<Data>, ctx: JobContext) => Result | Promise<Result>

export interface RunnerHost {
  /** A slot freed or jobs were dropped: the fetcher may claim more. */
  capacityChanged(): void
  reportError(err: Error): void
}

/**
 * Claimed-ahead jobs wait in the buffer (state 'claimed', still pending) until the worker starts them: one statement
 * starts the jobs asked for in a turn of the event loop, and a job it does not return (superseded by a replace,
 * cancelled, removed, or its lease taken over) is dropped without running. Started jobs wait in `ready` for a handler
 * slot. How many slots are free, how far ahead to start and what to claim next: Slots (src/worker/slots.ts).
 */
export class JobRunner<Data, Result> {
  /** Every job claimed and not yet settled. */
  readonly held = new HeldJobs<Data>()
  private readonly buffer = new Fifo<HeldJob<Data>>()
  /** Started (active in the database), waiting for a free slot: the start window. */
  private readonly ready = new StartedAhead<HeldJob<Data>>(() => this.slots.giveBackAfterMs(), (late) => void this.giveBack(late))
  private readonly slots: Slots
  private accepting = true
  /** Jobs whose handler has ended and whose outcome is being written (see Slots.demand). */
  private finishing = 0

  constructor(
    private readonly handler: Handler<Data, Result>,
    concurrency: number,
    batchSize: number,
    private readonly services: ContextServices,
    private readonly settler: Settler<Data, Result>,
    private readonly steps: StepBatcher,
    private readonly owner: JobOwner,
    private readonly host: RunnerHost,
    private readonly logger: Logger,
  ) {
    const runner = this
    this.slots = new Slots(concurrency, batchSize, {
      get buffered() { return runner.buffer.length },
      get ready() { return runner.ready.length },
      get held() { return runner.held.size },
      get finishing() { return runner.finishing },
      get accepting() { return runner.accepting },
    }, () => steps.startMs)
  }

  /** What to claim next (see Slots.demand). */
  demand(): Demand {
    return this.slots.demand()
  }

  /** A claim returned: the active rows run on the free slots (or wait in `ready`), the claimed ones wait for a start. */
  claimed(rows: ClaimedRow[], demand: Demand, latencyMs: number): void {
    this.slots.claimReturned(demand, latencyMs)
    for (const row of rows) {
      const h = new HeldJob<Data>(row, new Job<Data>(claimedToJobRow(row), null, this.owner), this.services)
      this.held.set(row.lock_token, h)
      if (row.state === 'active' && this.accepting) this.readied(h)
      else this.buffer.push(h)
    }
    this.fill()
  }

  /** Whether a hand-off would run at once: the worker is not closing and a handler slot is free (Slots.handOffRoom). */
  canTakeHandOff(): boolean {
    return this.accepting && this.slots.handOffRoom > 0
  }

  /**
   * A job a plain add handed to this worker (already active for it, see Notifier): it runs on a free slot (one that a
   * claim in flight reserved counts as free); with none free, or while closing, it goes back to the queue, its run not
   * counted.
   */
  handedOff(row: ClaimedRow): void {
    const h = new HeldJob<Data>(row, new Job<Data>(claimedToJobRow(row), null, this.owner), this.services)
    this.held.set(row.lock_token, h)
    h.phase = 'started'
    if (this.canTakeHandOff()) {
      this.ready.push(h)
      this.fill()
    } else void this.giveBack([h])
  }

  private readied(h: HeldJob<Data>): void {
    h.phase = 'started'
    this.ready.push(h)
  }

  /**
   * Runs started jobs on the free slots, then starts buffered jobs for the room left (see startRoom). The starts asked
   * for in one turn of the event loop share one statement (see StepBatcher), so that a turn of fast jobs costs one
   * round trip.
   */
  private fill(): void {
    if (!this.accepting) return
    while (this.slots.handlerFree && this.ready.length > 0) {
      const h = this.ready.shift() as HeldJob<Data>
      if (h.lost) this.settled(h)
      else void this.execute(h)
    }
    let room = this.slots.startRoom
    while (room > 0 && this.buffer.length > 0) {
      const h = this.buffer.shift() as HeldJob<Data>
      if (h.lost) {
        this.settled(h)
        continue
      }
      if (h.beating) {
        // Its heartbeat is in flight; Leases calls resume() when it returns.
        this.buffer.unshift(h)
        break
      }
      room--
      h.phase = 'starting'
      this.slots.starting++
      void this.steps.start(h.id, h.token).then((attempts) => {
        this.slots.starting--
        if (attempts !== null && this.accepting) {
          h.job = new Job<Data>({ ...claimedToJobRow(h.row, 'active'), attempts }, null, this.owner)
          this.readied(h)
          this.fill()
        } else {
          // Superseded, cancelled or removed while it waited, or its lease was taken over: it must not run. (While
          // closing, a job that did start is given back by the release in stop().)
          if (attempts !== null) {
            h.phase = 'buffered'
            this.buffer.push(h)
          } else {
            this.logger.debug({ jobId: h.id }, 'pgonce: a job claimed ahead was gone when its turn came; not run')
            this.settled(h)
          }
          this.fill()
          this.host.capacityChanged()
        }
      })
    }
  }

  /**
   * Started ahead and still without a slot after the bound (see StartedAhead), or handed off with no slot free: back
   * to the queue, run not counted.
   */
  private async giveBack(late: HeldJob<Data>[]): Promise<void> {
    const back = late.filter((h) => !h.lost)
    for (const h of late) if (h.lost) this.settled(h)
    if (back.length === 0) return
    for (const h of back) h.phase = 'settling'
    if (await this.release(back)) {
      this.logger.debug({ jobs: back.map((h) => h.id) }, 'pgonce: jobs started ahead found no free slot; given back')
      for (const h of back) this.settled(h)
    } else {
      for (const h of back.reverse()) {
        h.phase = 'started'
        this.ready.restore(h)
      }
      this.fill()
    }
  }

  private async execute(h: HeldJob<Data>): Promise<void> {
    this.slots.running++
    h.phase = 'running'
    const run = new RunTelemetry(h.row.queue, {
      id: h.id, name: h.row.name, attempts: h.job.attempts, runAtMs: h.row.run_at_ms, traceContext: h.row.trace_context,
    })
    let result: Result
    try {
      result = await run.within(() => this.handler(h.job, h))
    } catch (thrown) {
      const err = handlerError(thrown)
      run.end(err)
      this.handlerDone(h)
      await this.settler.threw(h, err).catch((e: Error) => this.host.reportError(e))
      this.finishing--
      this.settled(h)
      return
    }
    run.end()
    this.handlerDone(h)
    await this.settler.succeeded(h, result).catch((e: Error) => this.host.reportError(e))
    this.finishing--
    this.settled(h)
  }

  /** Frees the handler's slot at once: its outcome is written in the background (batched). */
  private handlerDone(h: HeldJob<Data>): void {
    h.phase = 'settling'
    this.finishing++
    this.slots.running--
    this.slots.pace.jobFinished()
    this.fill()
    this.host.capacityChanged()
  }

  /**
   * The job is off the worker's hands. That frees room under the cap on held jobs (`concurrency + batchSize`): a claim
   * the cap held back may go out now. (Without this call, a worker whose last handlers finished while their completions
   * were still being written kept the cap full, and then idled until the poll with a backlog in the queue.)
   */
  private settled(h: HeldJob<Data>): void {
    this.held.delete(h.token)
    this.host.capacityChanged()
  }

  /** A heartbeat returned: start the buffered jobs it held back. */
  resume(): void {
    this.fill()
  }

  /** Closing: jobs a claim still returns are held, not started, until `stop()` gives them back. */
  refuseNewStarts(): void {
    this.accepting = false
  }

  /** Stops starting jobs; the buffered and started ones (and any a late claim returned) go back to the queue, their run not counted. */
  async stop(): Promise<void> {
    this.accepting = false
    await this.startsSettled()
    const unstarted = [...this.buffer.drain(), ...this.ready.drain()].filter((h) => !h.lost)
    if (unstarted.length > 0) await this.release(unstarted)
    for (const h of unstarted) this.settled(h)
  }

  /** Gives jobs back to the queue, their run not counted; false (reported) if the statement failed. */
  private async release(jobs: HeldJob<Data>[]): Promise<boolean> {
    try {
      await this.services.store.release(jobs.map((h) => h.id), jobs.map((h) => h.token), 0)
      return true
    } catch (err) {
      this.host.reportError(err as Error)
      return false
    }
  }

  /** Waits for the running handlers at close, up to `closeTimeoutMs`; then aborts them (see HeldJobs.finish). */
  finish(closeTimeoutMs: number): Promise<void> {
    return this.held.finish(closeTimeoutMs, this.logger)
  }

  private async startsSettled(): Promise<void> {
    while (this.slots.starting > 0) await new Promise((resolve) => setTimeout(resolve, 5))
  }
}
