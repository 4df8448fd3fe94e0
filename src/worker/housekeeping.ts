// Runs housekeeping from a worker every maintenanceIntervalMs, one round at a time: paced, so that a backlog (a
// retention shortened on a long history) takes at most a quarter of its connection's time, and stopped at close.

import type pg from 'pg'
import type { Logger } from '../logger.js'
import { DEFAULT_BATCH_SIZE, housekeepingRound } from '../maintenance.js'

/** A paced round waits this many times each full batch's duration before the next (maintenance.ts, RoundSettings). */
const PACE = 3

export class Housekeeping {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | null = null
  private readonly stopping = new AbortController()

  private readonly logger: Logger

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
    private readonly intervalMs: number,
    logger: Logger,
    private readonly reportError: (err: Error) => void,
  ) {
    this.logger = logger.child({ component: 'pgonce.maintenance' })
  }

  /** Runs a first round now, then every interval (0: never). */
  start(): void {
    if (this.intervalMs <= 0 || this.timer !== undefined) return
    this.round()
    this.timer = setInterval(() => this.round(), this.intervalMs)
  }

  /** Stops the timer and a round in flight (before its next batch); resolves once that round has returned. */
  async stop(): Promise<void> {
    clearInterval(this.timer)
    this.timer = undefined
    this.stopping.abort()
    await this.running
  }

  private round(): void {
    if (this.running !== null || this.stopping.signal.aborted) return
    const settings = { batchSize: DEFAULT_BATCH_SIZE, pace: PACE, signal: this.stopping.signal }
    this.running = housekeepingRound(this.pool, this.schema, this.logger, settings)
      .then(
        () => {},
        (err: Error) => this.reportError(err),
      )
      .finally(() => {
        this.running = null
      })
  }
}
