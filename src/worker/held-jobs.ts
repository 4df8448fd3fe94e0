// The jobs a worker holds (claimed and not yet settled), by lock token, and the wait at close for none to be left.

import type { Logger } from '../logger.js'
import type { HeldJob } from './context.js'

/** By lock token: a stale run and its re-claim can share a job id. */
export class HeldJobs<Data> extends Map<string, HeldJob<Data>> {
  private waiters: (() => void)[] = []

  override delete(token: string): boolean {
    const deleted = super.delete(token)
    if (this.size === 0 && this.waiters.length > 0) for (const resolve of this.waiters.splice(0)) resolve()
    return deleted
  }

  /** Resolves true once every held job has settled, false after `ms`. */
  allSettled(ms: number): Promise<boolean> {
    if (this.size === 0) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms)
      this.waiters.push(() => {
        clearTimeout(timer)
        resolve(true)
      })
    })
  }

  /**
   * Waits up to `closeTimeoutMs` for the running handlers and their outcomes; then aborts the handlers still running
   * (their `ctx.signal`), and gives those that honour it a moment to throw, so that their jobs are released at once.
   */
  async finish(closeTimeoutMs: number, logger: Logger): Promise<void> {
    if (await this.allSettled(closeTimeoutMs)) return
    const still = [...this.values()].filter((h) => h.phase === 'running')
    logger.warn({ jobs: still.map((h) => h.id) }, 'pgonce: close timed out; aborting running handlers')
    for (const h of still) {
      h.abandoned = true
      h.abort(new Error(`pgonce: worker closed before job ${h.id} finished`))
    }
    await this.allSettled(Math.min(1_000, Math.max(100, closeTimeoutMs / 10)))
  }
}
