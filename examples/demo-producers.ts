// The producers: the web tier (a post or an edit is a business transaction that also enqueues its push) and the broker feed.

import type pg from 'pg'
import type { AddOutcome, Job, Queue } from 'pgonce'
import { type PushData, effectKey } from './demo-messages.js'
import { type CommentEvent, EVENT_KINDS, type EventKind } from './demo-plan.js'

/** The seed's notification window: a second request for the same push within 24 h finds the key. */
const DEDUP_TTL_MS = 24 * 60 * 60 * 1000
/** Room for the run a killed worker did not finish: housekeeping rescues the job, and the next attempt sends. */
const ATTEMPTS = 3
/** Producers firing at once; each comment's events go through one of them, in order. */
export const LANES = 4

/** How each kind of event was answered by `queue.add`. */
export type AddTally = Record<EventKind, Record<AddOutcome, number>>

export function emptyTally(): AddTally {
  const none = (): Record<AddOutcome, number> => ({
    added: 0,
    'duplicate-job-id': 0,
    'duplicate-key': 0,
    extended: 0,
    replaced: 0,
  })
  return Object.fromEntries(EVENT_KINDS.map((k) => [k, none()])) as AddTally
}

/** An add always says how it was decided (only a job read by id has no outcome). */
function outcomeOf(job: Job<PushData>): AddOutcome {
  if (job.outcome === null) throw new Error(`queue.add returned job ${job.id} without an outcome`)
  return job.outcome
}

export class Producers {
  readonly tally = emptyTally()

  constructor(
    private readonly app: pg.Pool,
    private readonly queue: Queue<PushData>,
    private readonly schema: string,
    private readonly onFired: () => void,
  ) {}

  /** Fires `events` on LANES producers; each comment stays on one lane, so that its post commits before its duplicates. */
  async fire(events: CommentEvent[]): Promise<void> {
    const lanes = Array.from({ length: LANES }, () => [] as CommentEvent[])
    for (const e of events) lanes[e.commentId % LANES]?.push(e)
    await Promise.all(
      lanes.map(async (lane) => {
        for (const e of lane) {
          this.tally[e.kind][await this.fireOne(e)]++
          this.onFired()
        }
      }),
    )
  }

  private async fireOne(e: CommentEvent): Promise<AddOutcome> {
    const data: PushData = { userId: e.userId, commentId: e.commentId, via: e.kind === 'redelivery' ? 'broker' : 'web' }
    const dedup = { deduplication: { id: `notify:${effectKey(e.userId, e.commentId)}`, ttl: DEDUP_TTL_MS } }
    switch (e.kind) {
      case 'post':
        return this.inTransaction(
          `insert into "${this.schema}".comments (id, user_id, body) values ($1, $2, $3)`,
          [e.commentId, e.userId, `comment ${e.commentId}`],
          data,
          { jobId: e.messageId, ...dedup },
        )
      case 'edit':
        // An edit re-fires the event under a new message id; only the key says it is the same push.
        return this.inTransaction(
          `update "${this.schema}".comments set body = $2, edits = edits + 1 where id = $1`,
          [e.commentId, `comment ${e.commentId}, edit ${e.edit}`],
          data,
          { jobId: e.messageId, ...dedup },
        )
      case 'retry':
        // The web tier timed out waiting for the commit and sends the same request again: same message id.
        return outcomeOf(await this.queue.add('push', data, { jobId: e.messageId, attempts: ATTEMPTS, ...dedup }))
      case 'redelivery':
        // The broker feed enqueues by message id only, as most consumers do; enqueue-side dedup cannot stop a
        // redelivery after the job ran (seed, step 2): the finished generation lets a fresh one in, and it runs.
        return outcomeOf(await this.queue.add('push', data, { jobId: e.messageId, attempts: ATTEMPTS }))
    }
  }

  /** The business write and the push's enqueue in one commit: no push for a comment that was rolled back. */
  private async inTransaction(
    sql: string,
    values: unknown[],
    data: PushData,
    opts: { jobId: string; deduplication: { id: string; ttl: number } },
  ): Promise<AddOutcome> {
    const client = await this.app.connect()
    try {
      await client.query('begin')
      await client.query(sql, values)
      const job = await this.queue.add('push', data, { ...opts, attempts: ATTEMPTS, tx: client })
      await client.query('commit')
      return outcomeOf(job)
    } catch (err) {
      await client.query('rollback').catch(() => {})
      throw err
    } finally {
      client.release()
    }
  }
}
