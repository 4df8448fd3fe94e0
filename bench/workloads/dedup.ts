// W5 and W7: each system's own dedup feature, under concurrent adds and as a single held key.

import { perSecond, percentile, runProducers } from '../measure.js'
import { type WorkloadContext, type WorkloadResult, probe } from './context.js'

/** W5: adds over a fixed set of keys from 16 producers; exactly one job per key must exist afterwards. */
export async function dedupAdds(ctx: WorkloadContext): Promise<WorkloadResult> {
  const { w5Adds: n, w5Keys: keys, producers } = ctx.sizes
  await ctx.system.prepare('w5', { dedup: true })
  await warmDedup(ctx)
  await ctx.beforeTimed()
  const probed = await probe(ctx, n, () => runProducers(n, producers, (i) => ctx.system.addDeduplicated('w5', `key-${i % keys}`, { i })))
  const created = await ctx.system.countJobs('w5')
  return {
    ops: n,
    perSecond: perSecond(n, probed.ms),
    ...probed,
    created,
    expected: keys,
    correct: created === keys,
    ...(created === keys ? {} : { note: `${created} jobs created over ${keys} keys` }),
  }
}

/**
 * Untimed keyed adds (first adds and duplicates) from every producer, on a queue of their own: the pass's warm-up adds
 * plain jobs only, so W5's first keyed add on each connection paid what a session pays once (the dedup functions of
 * pgonce and graphile-worker compiled, their plans made: ~20-30 ms a connection, a fifth of a W5 run on 2 cores).
 */
async function warmDedup(ctx: WorkloadContext): Promise<void> {
  const { producers } = ctx.sizes
  await ctx.system.prepare('w5-warmup', { dedup: true })
  await runProducers(20 * producers, producers, (i) => ctx.system.addDeduplicated('w5-warmup', `warm-${i % (5 * producers)}`, { i }))
}

/** W7: latency of a duplicate add while the key is held by a pending job. */
export async function duplicateAddLatency(ctx: WorkloadContext): Promise<WorkloadResult> {
  const { w7Samples: n, warmup } = ctx.sizes
  await ctx.system.prepare('w7', { dedup: true })
  await ctx.system.addDeduplicated('w7', 'held', { i: 0 })
  for (let i = 0; i < warmup; i++) await ctx.system.addDeduplicated('w7', 'held', { i })
  await ctx.beforeTimed()
  const samples: number[] = []
  const probed = await probe(ctx, n, () => runProducers(n, 1, async (i) => {
    const started = performance.now()
    await ctx.system.addDeduplicated('w7', 'held', { i })
    samples.push(performance.now() - started)
  }))
  const jobs = await ctx.system.countJobs('w7')
  return {
    ops: n,
    ...probed,
    p50Ms: percentile(samples, 50),
    p99Ms: percentile(samples, 99),
    correct: jobs === 1,
    ...(jobs === 1 ? {} : { note: `${jobs} jobs under one held key` }),
  }
}
