// The story's voice: lines on stdout, and while events are fired a cli-progress bar of events fired and sends done (on stderr, terminals only).

import cliProgress from 'cli-progress'

export class Story {
  private bars: cliProgress.MultiBar | null = null
  private fired: cliProgress.SingleBar | null = null
  private sent: cliProgress.SingleBar | null = null

  /** The bar is for people watching: off when asked (DEMO_QUIET=1) and when either stream is piped or redirected. */
  constructor(private readonly quiet: boolean) {}

  get barsEnabled(): boolean {
    return !this.quiet && process.stdout.isTTY === true && process.stderr.isTTY === true
  }

  /** One line of the story. While the bar runs it is printed above it (both streams are this terminal then). */
  say(line: string): void {
    if (this.bars !== null) this.bars.log(`${line}\n`)
    else process.stdout.write(`${line}\n`)
  }

  startBars(events: number, sends: number): void {
    if (!this.barsEnabled || this.bars !== null) return
    this.bars = new cliProgress.MultiBar(
      {
        stream: process.stderr,
        format: ' {label} {bar} {value}/{total}',
        barsize: 40,
        hideCursor: true,
        clearOnComplete: false,
        // The demo stops the bar itself on Ctrl-C, before it cleans up.
        gracefulExit: false,
      },
      cliProgress.Presets.shades_classic,
    )
    this.fired = this.bars.create(events, 0, { label: 'events fired' })
    this.sent = this.bars.create(sends, 0, { label: 'sends done  ' })
  }

  /** The events fired so far, of a total that may grow (the broker's redeliveries come later). */
  firedSoFar(value: number, total: number): void {
    this.fired?.setTotal(total)
    this.fired?.update(value)
  }

  sendsDone(value: number): void {
    this.sent?.update(value)
  }

  /** Polls `read` every `ms` for the sends done (one read at a time); returns the function that stops it. */
  followSends(read: () => Promise<number>, ms: number): () => void {
    let reading = false
    const timer = setInterval(() => {
      if (reading || this.sent === null) return
      reading = true
      read()
        .then(
          (n) => this.sendsDone(n),
          () => {},
        )
        .finally(() => {
          reading = false
        })
    }, ms)
    return () => clearInterval(timer)
  }

  stopBars(): void {
    this.bars?.stop()
    this.bars = null
    this.fired = null
    this.sent = null
  }
}
