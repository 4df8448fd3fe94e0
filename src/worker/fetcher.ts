// The worker's claim loop: when to claim (how many, the runner says), from where in the queue, how an idle worker
// sleeps and wakes, and the claim whose answer was lost.

import type { Logger } from '../logger.js'
import { type ClaimCursor, type FetchedRow, HEAD, type JobStore, newTokenPrefix } from './job-store.js'
import type { Listener } from './shared-listener.js'
import type { JobRunner } from './batch-runner.js'

/**
 * Modes, and every transition between them:
 *
 * - `stopped`: before `start()` and after `stop()`; claims nothing.
 * - `ready`: claims as soon as the runner wants jobs (Runner.demand() > 0): → `claiming`. While it wants none, it
 *   waits for a slot to free (Runner.freed()) and asks again.
 * - `claiming`: one claim in flight, never two (a second would walk past the first one's locked rows). When it returns
 *   jobs: → `ready`. When it returns none: → `sleeping`, unless something woke the worker meanwhile (→ `ready`).
 *   When it fails: → `sleeping` with a retry timer (backing off to 5 s), the failure reported.
 * - `sleeping`: the queue had nothing due for this worker. Woken (→ `ready`) by a NOTIFY, the poll
 *   (`pollIntervalMs`), the due time of the next delayed job (or of a limit's next room), or a settle poll. Before it
 *   relies on NOTIFY, a sleeping worker takes an idle slot (see Notifier) and claims once more: an add committed before
 *   the slot was taken sent no NOTIFY, and that claim finds it. A claim that returns all it asked for gives the slot back (a busy worker claims
 *   again on its own, and NOTIFY serialises the adders' commits).
 *
 * A lost answer: the worker chooses the first half of a claim's lock tokens before it sends it. Until the answer
 * arrives that claim counts as unanswered; one whose answer never came (its connection dropped after it committed) is
 * given back (sql/release-lost-claim.sql) before the next claim goes out, so its jobs wait for no lease to expire.
 *
 * Where a claim starts: after the last job this worker claimed (its cursor), so that it never walks the index entries
 * of the rows earlier claims took (dead until VACUUM, and kept while any transaction holds back the xmin horizon).
 * Jobs that sort before the cursor (a higher priority, an earlier run_at) are found by a claim from the head of the
 * queue, which the fetcher makes whenever the last one is more than `HEAD_SCAN_MS` old.
 *
 * Settle polls: an add NOTIFYs only if an idle slot of its queue is held when it runs. One made before the worker took
 * its slot, in a transaction that commits after the worker's last claim, is announced by nothing, and later adds see
 * the slot held and NOTIFY too late for it. So after a claim finds the queue dry the worker claims again at
 * FIRST_SETTLE_POLL_MS, then at twice the previous interval until the poll interval is reached: such jobs start within
 * about twice the time their transaction stayed open. Finding jobs starts the series over. What they cost where
 * nothing is missed: W6 0.99x, W8 0.97x, within the noise (bench/DECISIONS.md#settle-polls, measured beside a hand-off since removed).
 */
type Mode = 'stopped' | 'ready' | 'claiming' | 'sleeping'

/** How often at most a claim starts from the head of the queue instead of the cursor. */
export const HEAD_SCAN_MS = 250
/** Shortest pause before claiming again after a claim that found due work locked by others. */
const MIN_REWAKE_MS = 5
/** Longest pause before claiming again after a failure. */
const MAX_CLAIM_RETRY_MS = 5_000
/** First settle poll after the queue ran dry; each next one waits twice as long. */
const FIRST_SETTLE_POLL_MS = 25

export class Fetcher<Data, Result> {
  private mode: Mode = 'stopped'
  private wokenDuringClaim = false
  private cursor: ClaimCursor = HEAD
  private lastHeadAt = -Infinity
  private retryMs = 100
  private pollTimer: NodeJS.Timeout | undefined
  private dueTimer: NodeJS.Timeout | undefined
  private dueAt = Infinity
  private inFlight: Promise<void> | null = null
  private waitingForSlot = false
  /** The token prefix of the last claim sent whose answer has not come (newTokenPrefix()). */
  private unanswered: string | null = null
  /** Interval of the last settle poll; 0: busy or just started (the next empty claim starts the series); null: done. */
  private settleMs: number | null = 0
  private settleTimer: NodeJS.Timeout | undefined

  constructor(
    private readonly store: JobStore,
    private readonly notifier: Listener,
    private readonly runner: Pick<JobRunner<Data, Result>, 'demand' | 'claimed' | 'freed'>,
    private readonly pollIntervalMs: number,
    private readonly reportError: (err: Error) => void,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (this.mode !== 'stopped') return
    this.mode = 'ready'
    this.pollTimer = setInterval(() => this.wake(), this.pollIntervalMs)
    this.pump()
  }

  /** Stops claiming; resolves once a claim in flight has returned (its jobs handed to the runner) or been given back. */
  async stop(): Promise<void> {
    this.mode = 'stopped'
    clearInterval(this.pollTimer)
    clearTimeout(this.dueTimer)
    clearTimeout(this.settleTimer)
    await this.inFlight
    if (this.unanswered !== null) await this.releaseUnanswered().catch(() => {})
  }

  /** Something may be due (NOTIFY, poll, timer, reconnect): claim if the worker wants jobs. */
  wake(): void {
    if (this.mode === 'stopped') return
    if (this.mode === 'claiming') {
      this.wokenDuringClaim = true
      return
    }
    this.mode = 'ready'
    this.pump()
  }

  /** Claims again in `ms` (at least MIN_REWAKE_MS) unless the poll comes first. */
  wakeIn(ms: number): void {
    if (this.mode === 'stopped' || ms >= this.pollIntervalMs) return
    const delay = Math.max(MIN_REWAKE_MS, Math.ceil(ms))
    const at = Date.now() + delay
    if (this.dueTimer !== undefined && this.dueAt <= at) return
    clearTimeout(this.dueTimer)
    this.dueAt = at
    this.dueTimer = setTimeout(() => {
      this.dueTimer = undefined
      this.dueAt = Infinity
      this.wake()
    }, delay)
  }

  private pump(): void {
    if (this.mode !== 'ready') return
    const limit = this.runner.demand()
    if (limit <= 0) return this.waitForSlot()
    this.mode = 'claiming'
    this.wokenDuringClaim = false
    const fromHead = performance.now() - this.lastHeadAt >= HEAD_SCAN_MS
    if (fromHead) this.lastHeadAt = performance.now()
    const sentAt = performance.now()
    this.inFlight = this.claim(limit, fromHead ? HEAD : this.cursor).then(
      (rows) => this.returned(rows, limit, fromHead, sentAt),
      (err: Error) => this.failed(err, limit, sentAt),
    )
  }

  private waitForSlot(): void {
    if (this.waitingForSlot) return
    this.waitingForSlot = true
    void this.runner.freed().then(() => {
      this.waitingForSlot = false
      this.pump()
    })
  }

  /** A claim of up to `limit` jobs after `from`, once an earlier one whose answer was lost is given back. */
  private async claim(limit: number, from: ClaimCursor): Promise<FetchedRow[]> {
    if (this.unanswered !== null) await this.releaseUnanswered()
    const prefix = newTokenPrefix()
    this.unanswered = prefix
    const rows = await this.store.claim(limit, from, prefix)
    this.unanswered = null
    return rows
  }

  private async releaseUnanswered(): Promise<void> {
    const given = await this.store.releaseLostClaim(this.unanswered as string)
    if (given > 0)
      this.logger.warn({ jobs: given }, 'pgonce: a claim whose answer was lost gave its jobs back to the queue')
    this.unanswered = null
  }

  private returned(rows: FetchedRow[], limit: number, fromHead: boolean, sentAt: number): void {
    this.inFlight = null
    if (this.mode === 'stopped') return this.runner.claimed(rows, limit, sentAt, 0)
    this.retryMs = 100
    const last = rows[rows.length - 1]
    if (last !== undefined) this.cursor = { priority: last.priority, runAtUs: last.run_at_us, id: last.id }
    else if (fromHead) this.cursor = HEAD
    if (rows.length >= limit) this.notifier.withdraw()
    this.mode = rows.length > 0 || this.wokenDuringClaim ? 'ready' : 'sleeping'
    if (rows.length > 0) {
      this.settleMs = 0
      clearTimeout(this.settleTimer)
      this.settleTimer = undefined
    }
    this.runner.claimed(rows, limit, sentAt, performance.now() - sentAt)
    if (this.mode === 'sleeping') this.sleep()
    else this.pump()
  }

  private failed(err: Error, limit: number, sentAt: number): void {
    this.inFlight = null
    this.runner.claimed([], limit, sentAt, 0)
    if (this.mode === 'stopped') return
    this.reportError(err)
    this.mode = 'sleeping'
    this.wakeIn(this.retryMs)
    this.retryMs = Math.min(this.retryMs * 2, MAX_CLAIM_RETRY_MS)
  }

  /** Nothing due for this worker: advertise for NOTIFY (then look once more), arm the due timer and the settle poll. */
  private sleep(): void {
    void this.notifier.advertise().then((took) => {
      if (this.mode !== 'sleeping') return
      // Just advertised: an add that committed before the slot was taken sent no NOTIFY; one more claim finds it.
      if (took) this.wake()
      else {
        void this.scheduleNextDue()
        this.settlePoll()
      }
    })
  }

  /** After an empty claim: sleep until something may start (sql/next-run-at.sql), or the poll, whichever is first. */
  private async scheduleNextDue(): Promise<void> {
    try {
      const ms = await this.store.nextDueInMs()
      if (ms !== null && this.mode === 'sleeping') this.wakeIn(ms)
    } catch (err) {
      this.reportError(err as Error)
    }
  }

  /** The next settle poll after an empty claim, if the series has not reached the poll interval. */
  private settlePoll(): void {
    if (this.settleMs === null) return
    const next = this.settleMs === 0 ? FIRST_SETTLE_POLL_MS : this.settleMs * 2
    if (next >= this.pollIntervalMs) {
      this.settleMs = null
      return
    }
    this.settleMs = next
    this.settleTimer ??= setTimeout(() => {
      this.settleTimer = undefined
      this.wake()
    }, next)
  }
}
