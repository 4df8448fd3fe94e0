// Ticks the job schedulers of a worker's queue: wakes at the next tick (or the poll, or a NOTIFY that schedules changed).

import type pg from 'pg'
import { inTransaction } from '../db/checkout.js'
import { executorFor } from '../db/executor.js'
import type { Logger } from '../logger.js'
import { msToNextTick, runDueTicks } from '../schedulers.js'

export class Schedules {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | null = null
  private stopped = true

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
    private readonly queue: string,
    private readonly maxWaitMs: number,
    private readonly logger: Logger,
    private readonly reportError: (err: Error) => void,
  ) {}

  start(): void {
    this.stopped = false
    this.tick()
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.running
  }

  /** Schedules may have changed (a NOTIFY from upsertJobScheduler): look again now. */
  changed(): void {
    if (!this.stopped) this.tick()
  }

  private tick(): void {
    if (this.running !== null || this.stopped) return
    clearTimeout(this.timer)
    this.running = this.round()
      .then(
        (waitMs) => this.after(waitMs),
        (err: Error) => {
          this.reportError(err)
          this.after(this.maxWaitMs)
        },
      )
      .finally(() => {
        this.running = null
      })
  }

  private after(waitMs: number): void {
    if (this.stopped) return
    this.timer = setTimeout(() => this.tick(), Math.max(5, Math.min(waitMs, this.maxWaitMs)))
  }

  /** Adds the jobs of every tick that has come (one transaction); ms until the next one. */
  private async round(): Promise<number> {
    const added = await inTransaction(this.pool, this.logger, (client) =>
      runDueTicks(executorFor(client), this.schema, this.queue, Number.MAX_SAFE_INTEGER, this.reportError),
    )
    if (added > 0) this.logger.debug({ added }, 'pgonce: scheduler ticks added jobs')
    const wait = await msToNextTick(executorFor(this.pool), this.schema, this.queue)
    return wait ?? this.maxWaitMs
  }
}
