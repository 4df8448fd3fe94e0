// W6: time from calling add to the handler starting, one job at a time, with an idle worker.

import { percentile, pollUntil, runProducers, within } from '../measure.js'
import { type WorkloadContext, type WorkloadResult, probe } from './context.js'

/** Time given to the consumer to go idle after starting, and to finish each job before the next add. */
const SETTLE_MS = 300
const GAP_MS = 10

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export async function pickupLatency(ctx: WorkloadContext): Promise<WorkloadResult> {
  const { w6Samples: n, warmup } = ctx.sizes
  await ctx.system.prepare('w6')
  let started: ((latencyMs: number) => void) | null = null
  const consumer = await ctx.system.consume('w6', (data) => {
    const latency = performance.now() - (data.t ?? Number.NaN)
    started?.(latency)
    started = null
  })
  const samples: number[] = []
  const sample = async (i: number): Promise<number> => {
    const handlerStarted = new Promise<number>((resolve) => {
      started = resolve
    })
    await ctx.system.add('w6', { i, t: performance.now() })
    const latency = await within(handlerStarted, 30_000, `job ${i} to start`)
    await pause(GAP_MS)
    return latency
  }
  try {
    await pause(SETTLE_MS)
    for (let i = 0; i < warmup; i++) await sample(-1 - i)
    const probed = await probe(ctx, n, () => runProducers(n, 1, async (i) => {
      samples.push(await sample(i))
    }))
    await pollUntil(async () => (await ctx.system.countUnfinished('w6')) === 0, 30_000, 'W6 jobs to complete')
    return { ops: n, ...probed, p50Ms: percentile(samples, 50), p99Ms: percentile(samples, 99), correct: true }
  } finally {
    await consumer.close()
  }
}
