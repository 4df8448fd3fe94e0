// W6: time from calling add to the handler starting, one job at a time, each after the same idle pause.

import { percentile, pollUntil, within } from '../measure.js'
import { type WorkloadContext, type WorkloadResult, probe } from './context.js'

/** Time given to a freshly started consumer to go idle before the first sample. */
export const SETTLE_MS = 300
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Takes `count` back-to-back samples of `once()`, each after `pauseMs` of idleness; `once()` resolves only when the
 * previous operation is over (for a queue: its add has returned *and* its handler has started), with its latency in ms.
 * The one loop the queues and the bare INSERT + pg_notify reference share, so that all wait alike.
 */
export async function idleSamples(count: number, pauseMs: number, once: (i: number) => Promise<number>): Promise<number[]> {
  const samples: number[] = []
  for (let i = 0; i < count; i++) {
    await pause(pauseMs)
    samples.push(await once(i))
  }
  return samples
}

/**
 * W6, the same for every system: producer and consumer in one process; for each sample, pause `w6PauseMs` (nothing in
 * flight: the previous add returned and its handler started), then call add() and wait until both that call has
 * returned and the handler has started. The latency is add() called → handler started, whichever of the two ends
 * first (with a hand-off to an idle worker the handler can start before add() returns).
 */
export async function pickupLatency(ctx: WorkloadContext): Promise<WorkloadResult> {
  const { w6Samples: n, warmup, w6PauseMs } = ctx.sizes
  await ctx.system.prepare('w6')
  await ctx.beforeTimed()
  let started: ((at: number) => void) | null = null
  const consumer = await ctx.system.consume('w6', () => {
    const at = performance.now()
    started?.(at)
    started = null
  })
  const sample = async (i: number): Promise<number> => {
    const handlerStarted = new Promise<number>((resolve) => {
      started = resolve
    })
    const calledAt = performance.now()
    const [, startedAt] = await Promise.all([ctx.system.add('w6', { i, t: calledAt }), within(handlerStarted, 30_000, `job ${i} to start`)])
    return startedAt - calledAt
  }
  try {
    await pause(SETTLE_MS)
    await idleSamples(warmup, w6PauseMs, (i) => sample(-1 - i))
    let samples: number[] = []
    const probed = await probe(ctx, n, async () => {
      const begun = performance.now()
      samples = await idleSamples(n, w6PauseMs, sample)
      return performance.now() - begun
    })
    await pollUntil(async () => (await ctx.system.countUnfinished('w6')) === 0, 30_000, 'W6 jobs to complete')
    return { ops: n, ...probed, p50Ms: percentile(samples, 50), p99Ms: percentile(samples, 99), correct: true }
  } finally {
    await consumer.close()
  }
}
