// The jobs a worker started ahead of a free slot (the start window, see JobRunner), and the bound on how long one may
// wait for a slot: a job still waiting after `boundMs()` is handed to `overdue`, which gives it back to the queue.

import { Fifo } from './fifo.js'

export class StartedAhead<T> {
  private readonly jobs = new Fifo<{ job: T; at: number }>()
  private timer: NodeJS.Timeout | undefined

  /**
   * The window is sized to the handlers' recent pace, so it can be wrong: a burst of fast jobs followed by a slow one
   * leaves the jobs started behind it waiting for as long as the slow handler runs. The bound makes that wait short
   * whatever the pace said.
   */
  constructor(
    private readonly boundMs: () => number,
    private readonly overdue: (jobs: T[]) => void,
  ) {}

  get length(): number {
    return this.jobs.length
  }

  push(job: T): void {
    this.jobs.push({ job, at: performance.now() })
    this.arm()
  }

  /** Puts back a job whose giving back failed: it waits for a slot with no bound (a retry would only fail again). */
  restore(job: T): void {
    this.jobs.unshift({ job, at: Infinity })
  }

  shift(): T | undefined {
    return this.jobs.shift()?.job
  }

  drain(): T[] {
    clearTimeout(this.timer)
    this.timer = undefined
    return this.jobs.drain().map((e) => e.job)
  }

  private arm(): void {
    const head = this.jobs.peek()
    if (this.timer !== undefined || head === undefined || head.at === Infinity) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.expire()
    }, Math.max(0, head.at + this.boundMs() - performance.now()))
  }

  private expire(): void {
    const bound = this.boundMs()
    const now = performance.now()
    const late: T[] = []
    for (let head = this.jobs.peek(); head !== undefined && now - head.at >= bound; head = this.jobs.peek()) {
      late.push((this.jobs.shift() as { job: T }).job)
    }
    if (late.length > 0) this.overdue(late)
    this.arm()
  }
}
