// The settings a Queue stores in Postgres for every process: paused, retention, limits (docs/operations.md,
// docs/flow-control.md). Queue extends this class.

import type { Execute, Transactional } from './db/executor.js'
import { type Limits, type QueueLimits, getLimits, limitsParams, setLimits } from './limits.js'
import { type RetentionSettings, getSettings, retentionParams, setPaused, setRetention } from './queue-control.js'
import type { WriteOptions } from './queue-options.js'
import { checkOptions } from './validate.js'

export abstract class QueueSettingsControl {
  abstract readonly name: string
  abstract readonly schema: string

  /** @internal Migrates on first use, then gives the caller's `tx` or pgonce's pool as an executor. */
  protected abstract executor(tx: Transactional | undefined, field?: string): Promise<Execute>

  /** Stops every worker of this queue from claiming (they finish what they hold); adds are still accepted and deduplicated. */
  async pause(options?: WriteOptions): Promise<void> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    await setPaused(await this.executor(tx, 'options.tx'), this.schema, this.name, true)
  }

  /** Lets the workers of this queue claim again (and wakes the idle ones). */
  async resume(options?: WriteOptions): Promise<void> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    await setPaused(await this.executor(tx, 'options.tx'), this.schema, this.name, false)
  }

  async isPaused(): Promise<boolean> {
    return (await getSettings(await this.executor(undefined), this.schema, this.name)).paused
  }

  /** Sets how long this queue's finished jobs are kept (stored in Postgres; housekeeping prunes by it). */
  async setRetention(settings: RetentionSettings, options?: WriteOptions): Promise<void> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    const params = retentionParams(this.name, settings)
    await setRetention(await this.executor(tx, 'options.tx'), this.schema, params)
  }

  /** This queue's retention, with the defaults filled in. */
  async getRetention(): Promise<Required<{ [K in keyof RetentionSettings]: number | null }>> {
    const s = await getSettings(await this.executor(undefined), this.schema, this.name)
    return { completedMs: s.completedRetentionMs, failedMs: s.failedRetentionMs, maxCompleted: s.maxCompleted }
  }

  /**
   * Sets this queue's limits, obeyed by every worker's claim (docs/flow-control.md): `concurrency` (jobs active at once
   * across all workers) and `rateLimit` (`{ max, durationMs }`, a sliding window). A key left out keeps its limit;
   * `null` clears it.
   */
  async setLimits(limits: Limits, options?: WriteOptions): Promise<void> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    const params = limitsParams(this.name, limits)
    await setLimits(await this.executor(tx, 'options.tx'), this.schema, params)
  }

  /** This queue's limits (null: none) and the concurrency slots its running jobs hold. */
  async getLimits(): Promise<QueueLimits> {
    return getLimits(await this.executor(undefined), this.schema, this.name)
  }
}
