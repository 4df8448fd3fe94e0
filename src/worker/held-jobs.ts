// The jobs a worker holds (claimed, not settled yet) by lock token, and what both runners do with them: give them back
// to the queue unrun, settle them, wake the claim loop when one leaves, and wait for them all at close.

import type { Logger } from '../logger.js'
import type { HeldJob } from './context.js'
import type { JobStore } from './job-store.js'

export class HeldJobs<Data> {
  private freedWaiters: (() => void)[] = []
  private settledWaiters: (() => void)[] = []

  constructor(
    /** Every job claimed and not yet settled, by lock token (a stale run and its re-claim can share a job id); the heartbeat reads it. */
    readonly map: Map<string, HeldJob<Data>>,
    private readonly store: JobStore,
    private readonly reportError: (err: Error) => void,
    private readonly logger: Logger,
  ) {}

  get size(): number {
    return this.map.size
  }

  add(h: HeldJob<Data>): void {
    this.map.set(h.token, h)
  }

  /** Resolves when a slot frees or a job leaves the worker: the fetcher may claim again. */
  freed(): Promise<void> {
    return new Promise((resolve) => this.freedWaiters.push(resolve))
  }

  notifyFreed(): void {
    for (const resolve of this.freedWaiters.splice(0)) resolve()
  }

  /** The job left the worker (its outcome written, given back, or lost). */
  settled(h: HeldJob<Data>): void {
    this.map.delete(h.token)
    this.notifyFreed()
    if (this.map.size === 0) for (const resolve of this.settledWaiters.splice(0)) resolve()
  }

  /** Gives jobs back to the queue, their run not counted; a statement that failed leaves them to the lease rescue. */
  async giveBack(jobs: HeldJob<Data>[]): Promise<void> {
    const back = jobs.filter((h) => !h.lost)
    if (back.length > 0) {
      try {
        await this.store.release(
          back.map((h) => h.id),
          back.map((h) => h.token),
          0,
        )
        this.logger.debug({ jobs: back.map((h) => h.id) }, 'pgonce: jobs claimed and not started given back')
      } catch (err) {
        this.reportError(err as Error)
      }
    }
    for (const h of jobs) this.settled(h)
  }

  /** Resolves true once every held job has settled, false after `ms`. */
  allSettled(ms: number): Promise<boolean> {
    if (this.map.size === 0) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms)
      this.settledWaiters.push(() => {
        clearTimeout(timer)
        resolve(true)
      })
    })
  }

  /** close() stopped waiting: every running handler's job is marked abandoned and its `ctx.signal` aborted. */
  abandonRunning(what: string): void {
    const still = [...this.map.values()].filter((h) => h.phase === 'running')
    // Timed-out handlers that ignore their signal are named too: their attempts are recorded, they still run.
    const timedOut = [...this.map.values()].filter((h) => h.timedOut !== null).map((h) => h.id)
    this.logger.warn({ jobs: still.map((h) => h.id), timedOut }, `pgonce: close timed out; aborting running ${what}`)
    for (const h of still) {
      h.abandoned = true
      h.abort(new Error(`pgonce: worker closed before job ${h.id} finished`))
    }
  }
}
