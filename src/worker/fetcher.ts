// The worker's claim loop: when to claim, how many, from where in the queue, and how an idle worker sleeps and wakes.

import type { Logger } from '../logger.js'
import { type ClaimCursor, type ClaimedRow, type FetchedRow, HEAD, type JobStore } from './job-store.js'
import type { Notifier } from './notifier.js'
import { SettlePolls } from './settle.js'

/**
 * Modes, and every transition between them:
 *
 * - `stopped`: before `start()` and after `stop()`; claims nothing.
 * - `ready`: claims as soon as the worker wants jobs (`demand()` > 0): → `claiming`.
 * - `claiming`: one claim in flight, never two (a second would walk past the first one's locked rows). When it returns
 *   jobs: → `ready`. When it returns none: → `sleeping`, unless something woke the worker meanwhile (→ `ready`).
 *   When it fails: → `sleeping` with a retry timer (backing off to 5 s), the failure reported. A claim that finds
 *   nothing due while the worker has free slots takes over jobs other workers claimed ahead and have not started.
 * - `sleeping`: the queue had nothing due for this worker. Woken (→ `ready`) by a NOTIFY, the poll
 *   (`pollIntervalMs`), the due time of the next delayed job, a settle poll, or capacity freed by a finished job.
 *   Before it relies on NOTIFY, a sleeping worker takes an idle slot (see Notifier) and claims once more: an add
 *   committed before the slot was taken sent no NOTIFY, and that claim finds it. A claim that returns a full batch
 *   gives the slot back (a busy worker claims again on its own, and NOTIFY serialises the adders' commits). A worker
 *   that sleeps with a free handler slot also takes hand-offs (plain adds send the job itself in the NOTIFY, already
 *   active for it: JobRunner.handedOff); they run without a claim and leave the mode as it is.
 *
 * Where a claim starts: after the last job this worker claimed (its cursor), so that it never walks the index entries
 * of the rows earlier claims took (dead until VACUUM, and kept while any transaction holds back the xmin horizon).
 * Jobs that sort before the cursor (a higher priority, an earlier run_at) are found by a claim from the head of the
 * queue, which the fetcher makes whenever the last one is more than `HEAD_SCAN_MS` old.
 */
type Mode = 'stopped' | 'ready' | 'claiming' | 'sleeping'

/** How often at most a claim starts from the head of the queue instead of the cursor. */
export const HEAD_SCAN_MS = 250
/** Shortest pause before claiming again after a claim that found due work locked by others. */
const MIN_REWAKE_MS = 5
/** Longest pause before claiming again after a failure. */
const MAX_CLAIM_RETRY_MS = 5_000
/** First settle poll after the queue ran dry (see SettlePolls); each next one waits twice as long. */
const FIRST_SETTLE_POLL_MS = 25

/** What the worker wants from the next claim. */
export interface Demand {
  /** Jobs to claim in all (0: none now). */
  limit: number
  /** Of those, how many it starts at once (free handler slots). */
  startNow: number
  /** Whether handlers were running or jobs held when the claim went out (its latency then says how fast they finish). */
  busy: boolean
}

export interface FetcherHost {
  demand(): Demand
  /** A claim for `demand` returned `rows` after `latencyMs` (0: it failed, or the worker is stopping). */
  claimed(rows: ClaimedRow[], demand: Demand, latencyMs: number): void
  /** Whether a handler slot is free: a sleeping worker takes hand-offs only then. */
  canTakeHandOff(): boolean
  reportError(err: Error): void
}

export class Fetcher {
  private mode: Mode = 'stopped'
  private wokenDuringClaim = false
  private cursor: ClaimCursor = HEAD
  private lastHeadAt = -Infinity
  private retryMs = 100
  private pollTimer: NodeJS.Timeout | undefined
  private dueTimer: NodeJS.Timeout | undefined
  private dueAt = Infinity
  private readonly settle: SettlePolls
  private inFlight: Promise<void> | null = null

  constructor(
    private readonly store: JobStore,
    private readonly notifier: Notifier,
    private readonly host: FetcherHost,
    private readonly pollIntervalMs: number,
    private readonly logger: Logger,
  ) {
    this.settle = new SettlePolls(FIRST_SETTLE_POLL_MS, pollIntervalMs, () => this.wake())
  }

  start(): void {
    if (this.mode !== 'stopped') return
    this.mode = 'ready'
    this.pollTimer = setInterval(() => this.wake(), this.pollIntervalMs)
    this.pump()
  }

  /** Stops claiming; resolves once a claim in flight has returned (its jobs were handed to the host). */
  async stop(): Promise<void> {
    this.mode = 'stopped'
    clearInterval(this.pollTimer)
    clearTimeout(this.dueTimer)
    this.settle.cancel()
    await this.inFlight
  }

  /** Something may be due (NOTIFY, poll, timer, capacity): claim if the worker wants jobs. */
  wake(): void {
    if (this.mode === 'stopped') return
    if (this.mode === 'claiming') {
      this.wokenDuringClaim = true
      return
    }
    this.mode = 'ready'
    this.pump()
  }

  /** The worker may want jobs now (a slot freed): claims unless sleeping or a claim is in flight. */
  pump(): void {
    if (this.mode !== 'ready') return
    const demand = this.host.demand()
    if (demand.limit <= 0) return
    this.mode = 'claiming'
    this.wokenDuringClaim = false
    const fromHead = performance.now() - this.lastHeadAt >= HEAD_SCAN_MS
    if (fromHead) this.lastHeadAt = performance.now()
    const from = fromHead ? HEAD : this.cursor
    const sent = performance.now()
    this.inFlight = this.claimOrSteal(demand, from).then(
      (rows) => this.returned(rows, demand, fromHead, performance.now() - sent),
      (err: Error) => this.failed(err, demand),
    )
  }

  /**
   * A claim; when it finds nothing due and the worker has free slots, it takes what other workers claimed ahead and
   * cannot start yet (an idle worker must not wait while jobs sit in a busy one's buffer).
   */
  private async claimOrSteal(demand: Demand, from: ClaimCursor): Promise<FetchedRow[]> {
    const rows = await this.store.claim(demand.limit, demand.startNow, from)
    if (rows.length > 0 || demand.startNow === 0) return rows
    return this.store.steal(demand.startNow)
  }

  private returned(rows: FetchedRow[], demand: Demand, fromHead: boolean, latencyMs: number): void {
    this.inFlight = null
    if (this.mode === 'stopped') {
      this.host.claimed(rows, demand, 0)
      return
    }
    this.retryMs = 100
    const last = rows[rows.length - 1]
    if (last !== undefined) this.cursor = { priority: last.priority, runAtUs: last.run_at_us, id: last.id }
    else if (fromHead) this.cursor = HEAD
    if (rows.length >= demand.limit) this.notifier.withdraw()
    const woken = this.wokenDuringClaim
    this.mode = rows.length > 0 || woken ? 'ready' : 'sleeping'
    if (rows.length > 0) this.settle.busy()
    this.host.claimed(rows, demand, latencyMs)
    if (this.mode === 'sleeping') this.sleep()
    else this.pump()
  }

  private failed(err: Error, demand: Demand): void {
    this.inFlight = null
    this.host.claimed([], demand, 0)
    if (this.mode === 'stopped') return
    this.host.reportError(err)
    this.mode = 'sleeping'
    this.wakeIn(this.retryMs)
    this.retryMs = Math.min(this.retryMs * 2, MAX_CLAIM_RETRY_MS)
  }

  /** Nothing due for this worker: advertise for NOTIFY (then look once more), arm the due timer and the settle polls. */
  private sleep(): void {
    void this.notifier.advertise(this.host.canTakeHandOff()).then((took) => {
      if (this.mode !== 'sleeping') return
      // Just advertised: an add that committed before the slot was taken sent no NOTIFY; one more claim finds it.
      if (took) this.wake()
      else {
        void this.scheduleNextDue()
        this.settle.empty()
      }
    })
  }

  /** After an empty claim: sleep until the next delayed job is due (or the poll, whichever is first). */
  private async scheduleNextDue(): Promise<void> {
    try {
      const ms = await this.store.nextDueInMs()
      if (ms !== null && this.mode === 'sleeping') this.wakeIn(ms)
    } catch (err) {
      this.host.reportError(err as Error)
    }
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
}
