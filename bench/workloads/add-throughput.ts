// W1-W3: add throughput, sequential, from 16 concurrent producers, and in bulk batches.

import { perSecond, runProducers } from '../measure.js'
import { type WorkloadContext, type WorkloadResult, payloads, probe } from './context.js'

/** Checks that exactly `expected` jobs landed in `queue`. */
async function landed(ctx: WorkloadContext, queue: string, expected: number): Promise<Pick<WorkloadResult, 'correct' | 'note'>> {
  const count = await ctx.system.countJobs(queue)
  return count === expected ? { correct: true } : { correct: false, note: `${count} jobs stored, expected ${expected}` }
}

/** W1: sequential awaited adds. */
export async function sequentialAdds(ctx: WorkloadContext): Promise<WorkloadResult> {
  const n = ctx.sizes.w1Adds
  await ctx.system.prepare('w1')
  await ctx.beforeTimed()
  const probed = await probe(ctx, n, () => runProducers(n, 1, (i) => ctx.system.add('w1', { i })))
  return { ops: n, perSecond: perSecond(n, probed.ms), ...probed, ...(await landed(ctx, 'w1', n)) }
}

/** W2: adds from 16 concurrent producers. */
export async function concurrentAdds(ctx: WorkloadContext): Promise<WorkloadResult> {
  const n = ctx.sizes.w2Adds
  await ctx.system.prepare('w2')
  await ctx.beforeTimed()
  const probed = await probe(ctx, n, () => runProducers(n, ctx.sizes.producers, (i) => ctx.system.add('w2', { i })))
  return { ops: n, perSecond: perSecond(n, probed.ms), ...probed, ...(await landed(ctx, 'w2', n)) }
}

/** W3: bulk adds in batches of 1,000, one batch after another. */
export async function bulkAdds(ctx: WorkloadContext): Promise<WorkloadResult> {
  const n = ctx.sizes.w3Jobs
  const batch = ctx.sizes.bulkBatch
  await ctx.system.prepare('w3')
  const batches = Math.ceil(n / batch)
  await ctx.beforeTimed()
  const probed = await probe(ctx, n, () =>
    runProducers(batches, 1, (b) => ctx.system.addBulk('w3', payloads(b * batch, Math.min(batch, n - b * batch)))))
  return { ops: n, perSecond: perSecond(n, probed.ms), ...probed, ...(await landed(ctx, 'w3', n)) }
}
