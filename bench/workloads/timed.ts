// W1–W3 and W5–W7 on one opened system: an untimed warm-up, then timed sections of n operations each (one section in a
// pass, one per round in the paired rounds), and a check of the outcome at the end.

import { percentile, perSecond, pollUntil, runProducers, within } from '../measure.js'
import type { BenchSystem, WorkloadId } from '../systems/system.js'
import { payloads } from './context.js'
import type { DrainId } from './drain.js'

/** A timed section's figure: throughput, or latency percentiles in ms. */
export interface Figure {
  perSecond?: number
  p50Ms?: number
  p99Ms?: number
}

export interface Timed {
  /** Untimed operations of the workload's own kind, into the same queue. */
  warm(): Promise<void>
  /** `n` operations numbered from `from` (every section its own numbers), timed. */
  run(n: number, from: number): Promise<Figure>
  /** What is wrong with the outcome (jobs lost or doubled, a key not held), or null. */
  check(): Promise<string | null>
  close(): Promise<void>
}

/** Whether a workload is ranked by throughput (higher is better) or by p50 latency (lower is better). */
export const KIND: Record<WorkloadId, 'rate' | 'latency'> = {
  W1: 'rate',
  W2: 'rate',
  W3: 'rate',
  W4: 'rate',
  W4B: 'rate',
  W5: 'rate',
  W6: 'latency',
  W7: 'latency',
  W8: 'rate',
}

/** A freshly started consumer is given this long to go idle before the first W6 sample. */
const SETTLE_MS = 300
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export const rate = (n: number, ms: number): Figure => ({ perSecond: perSecond(n, ms) })
const latencies = (samples: number[]): Figure => ({ p50Ms: percentile(samples, 50), p99Ms: percentile(samples, 99) })

/**
 * `count` samples of `once(i)`, each after `pauseMs` of idling; `once` resolves when its operation is over (for a queue:
 * the add has returned *and* the handler has started) with its latency. The one loop every W6 side shares.
 */
async function idleSamples(count: number, pauseMs: number, once: (i: number) => Promise<number>): Promise<number[]> {
  const samples: number[] = []
  for (let i = 0; i < count; i++) {
    await sleep(pauseMs)
    samples.push(await once(i))
  }
  return samples
}

/** The arrival of the sample in flight (a handler start, a notification): `seen` resolves what `next` returned. */
export function arrivals() {
  let arrived: ((at: number) => void) | null = null
  return {
    next: () =>
      new Promise<number>((resolve) => {
        arrived = resolve
      }),
    seen: () => {
      arrived?.(performance.now())
      arrived = null
    },
  }
}

/**
 * W6's loop: `call(i)` after `pauseMs` idle, until it has returned and `arrived()` has resolved; the latency runs from
 * the call to the arrival (a system may start the handler before its add returns). Settled: the consumer is idle.
 */
export async function handlerStartLoop(
  call: (i: number) => Promise<unknown>,
  arrived: () => Promise<number>,
  pauseMs: number,
  warmup: number,
  close: () => Promise<void>,
  check: () => Promise<string | null> = async () => null,
): Promise<Timed> {
  await sleep(SETTLE_MS)
  const sample = async (i: number): Promise<number> => {
    const arrival = arrived()
    const calledAt = performance.now()
    const [, at] = await Promise.all([call(i), within(arrival, 30_000, `sample ${i}`)])
    return at - calledAt
  }
  return {
    warm: () => idleSamples(warmup, pauseMs, (i) => sample(-1 - i)).then(() => {}),
    run: async (n, from) => latencies(await idleSamples(n, pauseMs, (i) => sample(from + i))),
    check,
    close,
  }
}

/** Counts what landed: `expected()` jobs in `queue`. */
function landed(system: BenchSystem, queue: string, expected: () => number): () => Promise<string | null> {
  return async () => {
    const count = await system.countJobs(queue)
    return count === expected() ? null : `${count} jobs in ${queue}, expected ${expected()}`
  }
}

/** W1, W2 (one add per operation, from `producers` loops) and W5 (keyed: ten adds per key, keys of the section's own). */
function adds(system: BenchSystem, queue: string, producers: number, warmup: number, keyed: boolean): Timed {
  let expected = 0
  const section = async (n: number, from: number): Promise<number> => {
    const keys = Math.max(1, Math.floor(n / 10))
    expected += keyed ? keys : n
    return runProducers(n, producers, (i) =>
      keyed
        ? system.addDeduplicated(queue, `s${from}-${i % keys}`, { i: from + i })
        : system.add(queue, { i: from + i }),
    )
  }
  return {
    warm: () =>
      system
        .prepare(queue, { dedup: keyed })
        .then(() => section(warmup, -warmup))
        .then(() => {}),
    run: async (n, from) => rate(n, await section(n, from)),
    check: landed(system, queue, () => expected),
    close: async () => {},
  }
}

/** W3: `addBulk` of `batch` items, one call after another. */
function bulkAdds(system: BenchSystem, batch: number): Timed {
  let expected = 0
  const section = async (n: number, from: number): Promise<number> => {
    expected += n
    const started = performance.now()
    for (let k = 0; k < n; k += batch) await system.addBulk('w3', payloads(from + k, Math.min(batch, n - k)))
    return performance.now() - started
  }
  return {
    warm: () =>
      system
        .prepare('w3')
        .then(() => section(2 * batch, -2 * batch))
        .then(() => {}),
    run: async (n, from) => rate(n, await section(n, from)),
    check: landed(system, 'w3', () => expected),
    close: async () => {},
  }
}

/** W7: a duplicate add while its key is held, one after another, each timed. */
function heldKey(system: BenchSystem, warmup: number): Timed {
  const duplicates = async (n: number): Promise<number[]> => {
    const samples: number[] = []
    for (let i = 0; i < n; i++) {
      const started = performance.now()
      await system.addDeduplicated('w7', 'held', { i })
      samples.push(performance.now() - started)
    }
    return samples
  }
  return {
    warm: async () => {
      await system.prepare('w7', { dedup: true })
      await duplicates(warmup + 1)
    },
    run: async (n) => latencies(await duplicates(n)),
    check: landed(system, 'w7', () => 1),
    close: async () => {},
  }
}

/** W6: the add to the system's idle consumer in this process, until the handler starts. */
async function handlerStart(system: BenchSystem, pauseMs: number, warmup: number): Promise<Timed> {
  await system.prepare('w6')
  const started = arrivals()
  const consumer = await system.consume('w6', started.seen)
  const allRan = async (): Promise<null> => {
    await pollUntil(async () => (await system.countUnfinished('w6')) === 0, 30_000, 'W6 jobs to complete')
    return null
  }
  return handlerStartLoop(
    (i) => system.add('w6', { i }),
    started.next,
    pauseMs,
    warmup,
    () => consumer.close(),
    allRan,
  )
}

/** Workload `id` (not a drain) opened on `system`. */
export async function openTimed(
  id: Exclude<WorkloadId, DrainId>,
  system: BenchSystem,
  s: { producers: number; bulkBatch: number; warmup: number; w6PauseMs: number },
): Promise<Timed> {
  switch (id) {
    case 'W1':
      return adds(system, 'w1', 1, s.warmup, false)
    case 'W2':
      return adds(system, 'w2', s.producers, s.warmup, false)
    case 'W3':
      return bulkAdds(system, s.bulkBatch)
    case 'W5':
      return adds(system, 'w5', s.producers, s.warmup, true)
    case 'W6':
      return handlerStart(system, s.w6PauseMs, s.warmup)
    case 'W7':
      return heldKey(system, s.warmup)
  }
}
