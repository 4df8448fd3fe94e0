// Batches finished handlers' completions: one statement for every job that finished while the previous one was in flight.

import type { Logger } from '../logger.js'
import type { Completion, JobStore } from './job-store.js'

interface Pending {
  completion: Completion
  settle: (completed: boolean) => void
}

/** Longest pause between retries of a completion statement that failed (database unreachable). */
const MAX_RETRY_MS = 5_000

export class CompletionBatcher {
  private pending: Pending[] = []
  private scheduled = false
  /** Set by stop(): completions are no longer written. */
  stopped = false

  constructor(
    private readonly store: JobStore,
    private readonly maxBatch: number,
    private readonly onError: (err: Error) => void,
    private readonly logger: Logger,
  ) {}

  /**
   * Queues a finished job's completion; resolves true once it is recorded, false
   * if its lease had been lost (or the worker stopped before it could be written).
   * Only jobs whose handler has returned are ever passed here.
   */
  add(completion: Completion): Promise<boolean> {
    if (this.stopped) return Promise.resolve(false)
    return new Promise((settle) => {
      this.pending.push({ completion, settle })
      if (!this.scheduled) {
        this.scheduled = true
        // After the current macrotask, so that every handler finishing in it shares one statement.
        setImmediate(() => void this.flush())
      }
    })
  }

  /** Gives up on completions not yet written: they resolve false (their jobs are rescued after the lease). */
  stop(): void {
    this.stopped = true
    for (const p of this.pending.splice(0)) p.settle(false)
  }

  private async flush(): Promise<void> {
    let retryMs = 100
    while (this.pending.length > 0 && !this.stopped) {
      const batch = this.pending.slice(0, this.maxBatch)
      try {
        const outcome = await this.store.complete(batch.map((p) => p.completion))
        this.pending.splice(0, batch.length)
        retryMs = 100
        for (const p of batch) p.settle(outcome.completed.has(p.completion.token))
        if (outcome.childrenWaiting) await this.promoteAfterCommit(outcome.ids)
      } catch (err) {
        if (this.stopped) break
        if (isDataError(err) && batch.length > 0) {
          // One result the database refuses (e.g. a lone surrogate in a string) must not hold back the others.
          await this.completeOneByOne(batch)
          this.pending.splice(0, batch.length)
          continue
        }
        this.onError(err as Error)
        await new Promise((resolve) => setTimeout(resolve, retryMs))
        retryMs = Math.min(retryMs * 2, MAX_RETRY_MS)
      }
    }
    this.scheduled = false
  }

  private async completeOneByOne(batch: Pending[]): Promise<void> {
    for (const p of batch) {
      let completion = p.completion
      for (;;) {
        try {
          const outcome = await this.store.complete([completion])
          p.settle(outcome.completed.has(completion.token))
          if (outcome.childrenWaiting) await this.promoteAfterCommit(outcome.ids)
          break
        } catch (err) {
          if (!isDataError(err) || completion.resultJson === null) {
            this.onError(err as Error)
            p.settle(false)
            break
          }
          this.logger.warn({ err, jobId: completion.id }, 'pgonce: the database refused the handler result; stored as null')
          completion = { ...completion, resultJson: null }
        }
      }
    }
  }

  /**
   * A dependent of two jobs completed at the same moment is promoted by neither
   * statement (each saw the other unfinished); after commit, the later of them
   * sees both. A crash right here is covered by housekeeping.
   */
  private async promoteAfterCommit(parentIds: string[]): Promise<void> {
    try {
      await this.store.promoteDependents(parentIds, 10_000)
    } catch (err) {
      this.logger.warn({ err }, 'pgonce: promoting dependents failed; housekeeping will')
    }
  }
}

/** SQLSTATE class 22: the data, not the connection, is at fault; retrying the same statement cannot help. */
function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code
  return typeof code === 'string' && code.startsWith('22')
}
