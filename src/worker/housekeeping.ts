// Runs housekeeping (runMaintenance) from a worker every maintenanceIntervalMs, one round at a time.

import type pg from 'pg'
import type { Logger } from '../logger.js'
import { runMaintenance } from '../maintenance.js'

export class Housekeeping {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | null = null

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
    private readonly intervalMs: number,
    private readonly logger: Logger,
    private readonly reportError: (err: Error) => void,
  ) {}

  /** Runs a first round now, then every interval (0: never). */
  start(): void {
    if (this.intervalMs <= 0 || this.timer !== undefined) return
    this.round()
    this.timer = setInterval(() => this.round(), this.intervalMs)
  }

  /** Stops the timer; resolves once a round in flight has finished. */
  async stop(): Promise<void> {
    clearInterval(this.timer)
    this.timer = undefined
    await this.running
  }

  private round(): void {
    if (this.running !== null) return
    this.running = runMaintenance({ pool: this.pool, schema: this.schema, logger: this.logger })
      .then(() => {}, (err: Error) => this.reportError(err))
      .finally(() => {
        this.running = null
      })
  }
}
