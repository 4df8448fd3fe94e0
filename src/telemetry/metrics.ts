// pgonce's metrics through @opentelemetry/api: a no-op until the application installs a MeterProvider (before it creates pgonce's objects).

import { type Attributes, type Counter, type Histogram, type UpDownCounter, metrics } from '@opentelemetry/api'
import { VERSION } from './version.js'

/** The instruments, with low-cardinality attributes only: queue, outcome, state. */
export interface Instruments {
  /** Adds by outcome (added, duplicate-job-id, duplicate-key, extended, replaced, rejected). */
  adds: Counter
  /** Runs that ended, by outcome: completed, failed (for good), retried, cancelled, rescheduled, lease-lost. */
  runs: Counter
  /** Jobs housekeeping rescued after their lease expired (attribute pgonce.schema). */
  rescued: Counter
  /** runOnce and effect outcomes: ran, duplicate-done, duplicate-running, claim-lost. */
  effects: Counter
  /** Redis pre-check outcomes: hit, miss, fallback, breaker-open. */
  cache: Counter
  /** Handler duration, seconds. */
  duration: Histogram
  /** From run_at (when the job became due) to its handler's start, seconds (worker clock against the database's). */
  wait: Histogram
  /** Handlers running now. */
  active: UpDownCounter
}

/** Bucket bounds for durations in seconds, from a fast handler (5 ms) to a long one (10 min). */
const SECONDS = {
  explicitBucketBoundaries: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
}

let cached: { provider: unknown; instruments: Instruments } | undefined

/** The instruments of the MeterProvider installed now (made once per provider). */
export function instruments(): Instruments {
  const provider = metrics.getMeterProvider()
  if (cached?.provider === provider) return cached.instruments
  const meter = provider.getMeter('pgonce', VERSION)
  const made: Instruments = {
    adds: meter.createCounter('pgonce.jobs.added', { description: 'Adds, by how they were decided' }),
    runs: meter.createCounter('pgonce.jobs.runs', { description: 'Runs that ended, by outcome' }),
    rescued: meter.createCounter('pgonce.jobs.rescued', { description: 'Jobs rescued after their lease expired' }),
    effects: meter.createCounter('pgonce.effects', { description: 'runOnce and effect outcomes' }),
    cache: meter.createCounter('pgonce.cache.checks', { description: 'Redis pre-check outcomes' }),
    duration: meter.createHistogram('pgonce.job.duration', {
      description: 'Handler duration',
      unit: 's',
      advice: SECONDS,
    }),
    wait: meter.createHistogram('pgonce.job.wait', {
      description: 'From due (run_at) to handler start',
      unit: 's',
      advice: SECONDS,
    }),
    active: meter.createUpDownCounter('pgonce.jobs.active', { description: 'Handlers running' }),
  }
  cached = { provider, instruments: made }
  return made
}

/** The counters a {@link Counters} can feed. */
export type CounterName = 'adds' | 'runs' | 'effects' | 'cache'

/**
 * A sink for `new Counters(sink)`: every increment is also added to OpenTelemetry counter `name`, with the queue (when
 * the counting object has one) and the outcome as attributes.
 */
export function countInto(name: CounterName, queue?: string): (outcome: string, by: number) => void {
  return (outcome, by) =>
    instruments()[name].add(by, queue === undefined ? { 'pgonce.outcome': outcome } : attrs(queue, outcome))
}

/** Attributes for a queue (and an outcome). */
export function attrs(queue: string, outcome?: string): Attributes {
  return outcome === undefined ? { 'pgonce.queue': queue } : { 'pgonce.queue': queue, 'pgonce.outcome': outcome }
}
