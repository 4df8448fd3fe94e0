// Named monotonic counters (outcomes, fallbacks), readable as a snapshot for metrics export.

export class Counters<K extends string> {
  private readonly counts = new Map<K, number>()

  increment(key: K, by = 1): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + by)
  }

  get(key: K): number {
    return this.counts.get(key) ?? 0
  }

  /** A copy of every counter that has been incremented. */
  snapshot(): Partial<Record<K, number>> {
    return Object.fromEntries(this.counts) as Partial<Record<K, number>>
  }
}
