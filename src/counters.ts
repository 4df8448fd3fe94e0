// Named monotonic counters (outcomes, fallbacks), readable as a snapshot, and fed to OpenTelemetry when given a sink.

export class Counters<K extends string> {
  private readonly counts = new Map<K, number>()

  /** `sink`, if given, hears every increment too (pgonce's OpenTelemetry counters: src/telemetry/metrics.ts). */
  constructor(private readonly sink?: (key: K, by: number) => void) {}

  /** @internal Counted by pgonce only: a user reads the counters. */
  increment(key: K, by = 1): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + by)
    this.sink?.(key, by)
  }

  get(key: K): number {
    return this.counts.get(key) ?? 0
  }

  /** A copy of every counter that has been incremented. */
  snapshot(): Partial<Record<K, number>> {
    return Object.fromEntries(this.counts) as Partial<Record<K, number>>
  }
}
