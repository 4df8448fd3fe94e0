// Keeps the leases of a worker's held jobs alive (heartbeats), and tells their handlers when a lease is lost or the job cancelled.

import { JobCancelledError, LeaseLostError } from '../errors.js'
import type { Logger } from '../logger.js'
import type { HeldJob } from './context.js'
import type { JobStore } from './job-store.js'

export class Leases<Data> {
  private timer: NodeJS.Timeout | undefined
  private beating = false

  constructor(
    private readonly store: JobStore,
    private readonly held: ReadonlyMap<string, HeldJob<Data>>,
    private readonly heartbeatMs: number,
    private readonly reportError: (err: Error) => void,
    private readonly logger: Logger,
    /** A heartbeat returned: the jobs it held back from starting may start. */
    private readonly beaten: () => void,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.beat(), this.heartbeatMs)
  }

  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
  }

  /** Extends the lease of every held job (claimed ahead, started or running) whose outcome is not being written. */
  async beat(): Promise<void> {
    if (this.beating) return
    const sent: HeldJob<Data>[] = []
    for (const h of this.held.values()) {
      if (!h.lost && h.completion === null && !h.abandoned && h.phase !== 'starting' && h.phase !== 'settling') sent.push(h)
    }
    if (sent.length === 0) return
    // A buffered job must not start while its heartbeat is in flight: a start step takes no turn (step-batcher.ts),
    // and the two statements locking the same rows in different orders deadlocked (`npm run demo`, 1 run in 6).
    for (const h of sent) h.beating = true
    this.beating = true
    try {
      const alive = await this.store.heartbeat(sent.map((h) => h.id), sent.map((h) => h.token))
      for (const h of sent) this.learned(h, alive.get(h.token))
    } catch (err) {
      this.reportError(err as Error)
    } finally {
      for (const h of sent) h.beating = false
      this.beating = false
      this.beaten()
    }
  }

  /** What a heartbeat said of one job: `cancelRequested` for a lease still held, undefined for a lost one. */
  private learned(h: HeldJob<Data>, cancelRequested: boolean | undefined): void {
    // Settled, settling (its own statement decides) or completed by ctx.transaction meanwhile: not lost.
    if (!this.held.has(h.token) || h.phase === 'settling' || h.phase === 'starting' || h.completion !== null) return
    if (cancelRequested === undefined) {
      h.lost = true
      h.abort(new LeaseLostError(h.id))
      this.logger.warn({ jobId: h.id, phase: h.phase }, 'pgonce: lease lost (taken over after it expired, or changed by hand)')
    } else if (cancelRequested && !h.cancelRequested) {
      h.cancelRequested = true
      h.abort(new JobCancelledError(h.id))
      this.logger.info({ jobId: h.id }, 'pgonce: job cancelled while running; its handler is aborted')
    }
  }
}
