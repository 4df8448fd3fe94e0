// After its queue runs dry, a worker claims again a few times, at growing intervals, before it relies on NOTIFY and the poll alone.

/**
 * An add NOTIFYs only if an idle slot of its queue is held when it runs (see Notifier). One made before a worker took
 * its slot, inside a transaction that commits only after that worker's last claim, is announced by nothing, and every
 * later add sees the slot held and NOTIFYs too late for it. These polls, at `firstMs`, then twice the previous
 * interval until the poll interval is reached, find such jobs (and whatever was added after them) within about twice
 * the time the transaction stayed open. They start after every claim that found the queue dry, and at start-up.
 * What they cost where nothing is missed, measured on and off (bench:pairs, three pairs, 2026-12-04): W6 0.99x, W8
 * 0.97x, both within the noise (bench/README.md, "Settle polls and hand-offs, on and off").
 */
export class SettlePolls {
  /** Interval of the last settle poll; 0: busy or just started (the next empty claim starts the series); null: not settling. */
  private lastMs: number | null = 0
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly firstMs: number,
    private readonly untilMs: number,
    private readonly wake: () => void,
  ) {}

  /** Jobs arrived (a claim found some, or one was handed over): an empty claim after them starts the series again. */
  busy(): void {
    this.lastMs = 0
    this.cancel()
  }

  /** A claim came back empty and the worker went to sleep: claim again after the next interval, if below the poll's. */
  empty(): void {
    if (this.lastMs === null) return
    const next = this.lastMs === 0 ? this.firstMs : this.lastMs * 2
    if (next >= this.untilMs) {
      this.lastMs = null
      return
    }
    this.lastMs = next
    if (this.timer !== undefined) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.wake()
    }, next)
  }

  cancel(): void {
    clearTimeout(this.timer)
    this.timer = undefined
  }
}
