// W1 and W6 paired with their limits: pgonce and the bare statement on its jobs table, alternated in rounds in one
// database, so that both see the same moment of the machine. Each workload's pass and its limit are otherwise single
// samples taken minutes apart; on this VM they moved W1's share between 50% and 105% over full runs (bench/README.md,
// "Paired with the limit").

import pg from 'pg'
import type { RunSettings } from './config.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { percentile, perSecond, runProducers, within } from './measure.js'
import { connect, statementsFor } from './limits.js'
import { pgonce } from './systems/pgonce.js'
import type { BenchSystem } from './systems/system.js'
import { type Mode, maintain } from './workloads/context.js'
import { SETTLE_MS, idleSamples } from './workloads/pickup-latency.js'

/** Rounds of each side, the two sides alternating (the limit first in even rounds, pgonce first in odd ones). */
export const PAIRED_ROUNDS = 8
/** Untimed operations of each side before the first round (the connections, plans and V8 warm). */
const WARMUP = 200
const CHANNEL = 'pgonce_bench_paired'

export type PairedWorkload = 'W1' | 'W6'

export interface PairedShare {
  workload: PairedWorkload
  mode: Mode
  /** Operations (W1) or samples (W6) per round and side. */
  perRound: number
  /** pgonce's figure in each round: adds/s (W1) or the p50 of the round's samples in ms (W6). */
  pgonce: number[]
  /** The limit's figure in each round, the same way. */
  limit: number[]
}

/** pgonce ÷ limit, round by round (for W6 a ratio of p50 latencies: below 1 is faster). */
export function pairedRatios(p: PairedShare): number[] {
  return p.pgonce.map((v, i) => v / (p.limit[i] as number))
}

/** The geometric mean of the rounds' ratios. */
export function pairedShare(p: PairedShare): number {
  const r = pairedRatios(p)
  return Math.exp(r.reduce((sum, x) => sum + Math.log(x), 0) / r.length)
}

/** One side of a pair: warm it up, then its figure for one round. */
interface Side {
  warm(): Promise<void>
  round(round: number): Promise<number>
}

/** The limit's side and pgonce's, and what to stop once the rounds are over. */
interface Pair {
  limit: Side
  pgonce: Side
  close(): Promise<void>
}

/** W1: sequential `queue.add` (the W1 pass's system and pool) against the bare one-row INSERT on a client of its own. */
function sequentialAdds(system: BenchSystem, client: pg.Client, insertOne: string, perRound: number): Pair {
  const insert = (i: number) => client.query({ name: 'paired-insert-one', text: insertOne, values: ['pairedlimit', 'job', JSON.stringify({ i })] })
  const rate = async (round: number, op: (i: number) => Promise<unknown>) =>
    perSecond(perRound, await runProducers(perRound, 1, async (i) => { await op(round * perRound + i) }))
  return {
    limit: { warm: () => runProducers(WARMUP, 1, async (i) => { await insert(-1 - i) }).then(() => {}), round: (r) => rate(r, insert) },
    pgonce: {
      warm: () => system.prepare('w1').then(() => runProducers(WARMUP, 1, (i) => system.add('w1', { i: -1 - i }))).then(() => {}),
      round: (r) => rate(r, (i) => system.add('w1', { i })),
    },
    close: async () => {},
  }
}

/**
 * W6: after the same idle pause, pgonce's add to its idle Worker until the handler starts, against one INSERT with
 * `pg_notify` until a LISTENing client of this process has the notification (the W6 pass and the insertNotify limit).
 */
async function pickupLatency(system: BenchSystem, client: pg.Client, url: string, insertNotify: string,
  perRound: number, pauseMs: number): Promise<Pair> {
  const listener = await connect(url)
  let heard: ((at: number) => void) | null = null
  listener.on('notification', () => {
    heard?.(performance.now())
    heard = null
  })
  await listener.query(`listen ${CHANNEL}`)
  let started: ((at: number) => void) | null = null
  await system.prepare('w6')
  const consumer = await system.consume('w6', () => {
    started?.(performance.now())
    started = null
  })
  const timed = async (i: number, op: () => Promise<unknown>, arrived: Promise<number>): Promise<number> => {
    const calledAt = performance.now()
    const [, at] = await Promise.all([op(), within(arrived, 30_000, `sample ${i}`)])
    return at - calledAt
  }
  const limitSample = (i: number) => timed(i,
    () => client.query({ name: 'paired-insert-notify', text: insertNotify, values: ['pairednotify', 'job', JSON.stringify({ i }), CHANNEL] }),
    new Promise<number>((resolve) => { heard = resolve }))
  const pgonceSample = (i: number) => {
    const arrived = new Promise<number>((resolve) => { started = resolve })
    return timed(i, () => system.add('w6', { i, t: performance.now() }), arrived)
  }
  const p50 = async (round: number, sample: (i: number) => Promise<number>) =>
    percentile(await idleSamples(perRound, pauseMs, (i) => sample(round * perRound + i)), 50)
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
  return {
    limit: { warm: () => idleSamples(WARMUP, pauseMs, (i) => limitSample(-1 - i)).then(() => {}), round: (r) => p50(r, limitSample) },
    pgonce: { warm: () => idleSamples(WARMUP, pauseMs, (i) => pgonceSample(-1 - i)).then(() => {}), round: (r) => p50(r, pgonceSample) },
    close: async () => {
      await consumer.close()
      await listener.end()
    },
  }
}

/**
 * `workload` paired with its limit in `mode`: a fresh database migrated by pgonce, both sides warmed, the mode's
 * maintenance, then PAIRED_ROUNDS rounds, each side once per round, in alternating order. W1 splits `sizes.w1Adds`
 * over the rounds, W6 `sizes.w6Samples`.
 */
export async function measurePaired(serverUrl: string, settings: RunSettings, mode: Mode, workload: PairedWorkload): Promise<PairedShare> {
  const s = settings.sizes
  const perRound = Math.ceil((workload === 'W1' ? s.w1Adds : s.w6Samples) / PAIRED_ROUNDS)
  const database = `pgonce_bench_paired_${workload.toLowerCase()}`
  const url = await freshDatabase(serverUrl, database)
  try {
    const system = await pgonce.open(url, 'default')
    const client = await connect(url)
    try {
      const sql = await statementsFor(client)
      const pair = workload === 'W1' ? sequentialAdds(system, client, sql.insertOne, perRound)
        : await pickupLatency(system, client, url, sql.insertNotify, perRound, s.w6PauseMs)
      try {
        await pair.limit.warm()
        await pair.pgonce.warm()
        await maintain(client, mode)
        const result: PairedShare = { workload, mode, perRound, pgonce: [], limit: [] }
        for (let round = 0; round < PAIRED_ROUNDS; round++) {
          const limitFirst = round % 2 === 0
          for (const side of limitFirst ? ['limit', 'pgonce'] as const : ['pgonce', 'limit'] as const) {
            result[side].push(await pair[side].round(round))
          }
        }
        return result
      } finally {
        await pair.close()
      }
    } finally {
      await client.end()
      await system.close()
    }
  } finally {
    await dropDatabase(serverUrl, database)
  }
}
