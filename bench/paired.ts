// The workloads whose target is a share of a limit, paired with it: pgonce and the bare statement on its jobs table,
// alternated in rounds in one database, so that both see the same moment of the machine. Each workload's pass and its
// limit are otherwise single samples taken minutes apart; on this VM they moved W1's share between 50% and 105% over
// full runs (bench/README.md, "Paired with the limit").

import pg from 'pg'
import { connect } from '../dev/postgres-server.js'
import type { RunSettings } from './config.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { percentile, perSecond, runProducers, within } from './measure.js'
import { insertBulk, statementsFor } from './limits.js'
import { pgonce } from './systems/pgonce.js'
import type { BenchSystem } from './systems/system.js'
import { type Mode, maintain, payloads } from './workloads/context.js'
import { SETTLE_MS, idleSamples } from './workloads/pickup-latency.js'

/** Rounds of each side, the two sides alternating (the limit first in even rounds, pgonce first in odd ones). */
export const PAIRED_ROUNDS = 8
/** Untimed operations of each side before the first round (the connections, plans and V8 warm). */
export const WARMUP = 200
const CHANNEL = 'pgonce_bench_paired'

/** In the order they run; W1, W2, W3 and W5 compare rates, W6 latencies. */
export const PAIRED_WORKLOADS = ['W1', 'W2', 'W3', 'W5', 'W6'] as const
export type PairedWorkload = (typeof PAIRED_WORKLOADS)[number]

export interface PairedShare {
  workload: PairedWorkload
  mode: Mode
  /** Operations (jobs added; W6: samples) per round and side. */
  perRound: number
  /** pgonce's figure in each round: jobs added per second, or for W6 the p50 of the round's samples in ms. */
  pgonce: number[]
  /** The limit's figure in each round, the same way. */
  limit: number[]
}

/** pgonce ÷ limit, round by round (for W6 a ratio of p50 latencies: below 1 is faster). */
export function pairedRatios(p: PairedShare): number[] {
  return roundRatios(p.pgonce, p.limit)
}

/** The geometric mean of the rounds' ratios. */
export function pairedShare(p: PairedShare): number {
  return geometricMean(pairedRatios(p))
}

/** `a[i]` ÷ `b[i]`, round by round. */
export function roundRatios(a: readonly number[], b: readonly number[]): number[] {
  return a.map((v, i) => v / (b[i] as number))
}

export function geometricMean(values: readonly number[]): number {
  return Math.exp(values.reduce((sum, x) => sum + Math.log(x), 0) / values.length)
}

/** One side of a pair: warm it up, then its figure for one round. */
export interface Side {
  warm(): Promise<void>
  round(round: number): Promise<number>
}

/** The limit's side and pgonce's, and what to stop once the rounds are over. */
interface Pair {
  limit: Side
  pgonce: Side
  close(): Promise<void>
}

/** Runs `op` over `clients`, one statement at a time on each (`runProducers` with one producer per client). */
function onClients(clients: pg.Client[]) {
  const free = [...clients]
  return async (op: (client: pg.Client) => Promise<unknown>): Promise<void> => {
    const client = free.pop() as pg.Client
    try {
      await op(client)
    } finally {
      free.push(client)
    }
  }
}

/** `ops` operations from `producers` loops; jobs per second. */
const rateOf = async (ops: number, producers: number, op: (i: number) => Promise<unknown>): Promise<number> =>
  perSecond(ops, await runProducers(ops, producers, async (i) => { await op(i) }))

/**
 * A system's adds (pgonce's `queue.add` on the pass's pool, or a peer's): W1 (one producer), W2 (16), or W5 (16,
 * `keyed`: the system's own dedup feature, ten adds per key over `keys` keys of the round's own).
 */
export function addSide(system: BenchSystem, queue: string, perRound: number, producers: number, keyed: { keys: number } | null): Side {
  const add = (round: number, i: number) => keyed
    ? system.addDeduplicated(queue, `r${round}-key-${i % keyed.keys}`, { i })
    : system.add(queue, { i })
  return {
    warm: () => system.prepare(queue, { dedup: keyed !== null }).then(() => rateOf(WARMUP, producers, (i) => add(-1, i))).then(() => {}),
    round: (r) => rateOf(perRound, producers, (i) => add(r, i)),
  }
}

/**
 * W1, W2 and W5: pgonce's adds (addSide) against the bare one-row INSERT, each producer of the limit on a client of its
 * own. The limit's rows go to pgonce's queue: the jobs indexes lead with the queue, so rows of a queue that sorts before
 * another's are inserted mid-index (no rightmost fast path, half-empty pages left behind by 50/50 splits), which cost
 * the limit ~18% against pgonce appending at the index's end (bench/README.md, "Where in the index a queue's rows go").
 */
async function adds(system: BenchSystem, url: string, insertOne: string, perRound: number, queue: string, producers: number,
  keyed: { keys: number } | null): Promise<Pair> {
  const clients = await Promise.all(Array.from({ length: producers }, () => connect(url)))
  const onClient = onClients(clients)
  const insert = (i: number) => onClient((c) => c.query({ name: 'paired-insert-one', text: insertOne, values: [queue, 'job', JSON.stringify({ i })] }))
  return {
    limit: { warm: () => rateOf(WARMUP, producers, (i) => insert(-1 - i)).then(() => {}), round: (r) => rateOf(perRound, producers, (i) => insert(r * perRound + i)) },
    pgonce: addSide(system, queue, perRound, producers, keyed),
    close: () => Promise.all(clients.map((c) => c.end())).then(() => {}),
  }
}

/**
 * W3: `queue.addBulk` of 1,000 items, one batch after another, against the bare 1,000-row INSERT (W3's limit) into the
 * same queue, on a client of its own; jobs/s.
 */
async function bulkAdds(system: BenchSystem, url: string, insertMany: string, perRound: number, batch: number): Promise<Pair> {
  const client = await connect(url)
  const bulk = async (r: number) => {
    const started = performance.now()
    for (let from = 0; from < perRound; from += batch) await system.addBulk('w3', payloads(r * perRound + from, Math.min(batch, perRound - from)))
    return perSecond(perRound, performance.now() - started)
  }
  const limit = async (r: number) => perSecond(perRound, await insertBulk(client, insertMany, 'w3', r * perRound, perRound))
  return {
    limit: { warm: () => limit(-1).then(() => {}), round: limit },
    pgonce: { warm: () => system.prepare('w3').then(() => bulk(-1)).then(() => {}), round: bulk },
    close: () => client.end(),
  }
}

/** Starts `at` of the sample in flight (a handler start, a notification), which the caller's callback resolves. */
function arrivals() {
  let arrived: ((at: number) => void) | null = null
  return {
    next: () => new Promise<number>((resolve) => { arrived = resolve }),
    seen: () => {
      arrived?.(performance.now())
      arrived = null
    },
  }
}

/** One W6 sample: `op` called, until it has returned and `arrived` has resolved; the latency is called → arrived. */
async function timedSample(i: number, op: () => Promise<unknown>, arrived: Promise<number>): Promise<number> {
  const calledAt = performance.now()
  const [, at] = await Promise.all([op(), within(arrived, 30_000, `sample ${i}`)])
  return at - calledAt
}

/** A side whose round is the p50 of `perRound` samples, each after `pauseMs` of idling. */
function latencySide(sample: (i: number) => Promise<number>, perRound: number, pauseMs: number): Side {
  return {
    warm: () => idleSamples(WARMUP, pauseMs, (i) => sample(-1 - i)).then(() => {}),
    round: async (r) => percentile(await idleSamples(perRound, pauseMs, (i) => sample(r * perRound + i)), 50),
  }
}

/**
 * The W6 pass's loop on `system` (pgonce or a peer): its add to its idle consumer of this process, until the handler
 * starts. Settled (the consumer idle) when this resolves.
 */
export async function handlerStartSide(system: BenchSystem, perRound: number, pauseMs: number): Promise<{ side: Side; close(): Promise<void> }> {
  const started = arrivals()
  await system.prepare('w6')
  const consumer = await system.consume('w6', started.seen)
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
  const sample = (i: number) => timedSample(i, () => system.add('w6', { i, t: performance.now() }), started.next())
  return { side: latencySide(sample, perRound, pauseMs), close: () => consumer.close() }
}

/**
 * W6: after the same idle pause, pgonce's add to its idle Worker until the handler starts, against one INSERT with
 * `pg_notify` until a LISTENing client of this process has the notification (the W6 pass and the insertNotify limit).
 */
async function pickupLatency(system: BenchSystem, url: string, insertNotify: string, perRound: number, pauseMs: number): Promise<Pair> {
  const client = await connect(url)
  const listener = await connect(url)
  const heard = arrivals()
  listener.on('notification', heard.seen)
  await listener.query(`listen ${CHANNEL}`)
  const limitSample = (i: number) => timedSample(i,
    () => client.query({ name: 'paired-insert-notify', text: insertNotify, values: ['pairednotify', 'job', JSON.stringify({ i }), CHANNEL] }),
    heard.next())
  const ours = await handlerStartSide(system, perRound, pauseMs)
  return {
    limit: latencySide(limitSample, perRound, pauseMs),
    pgonce: ours.side,
    close: async () => {
      await ours.close()
      await listener.end()
      await client.end()
    },
  }
}

/** PAIRED_ROUNDS rounds of `a` and `b`, one of each per round, `a` first in even rounds; their figures, in round order. */
export async function alternate(a: Side, b: Side): Promise<[number[], number[]]> {
  const figures: [number[], number[]] = [[], []]
  for (let round = 0; round < PAIRED_ROUNDS; round++) {
    const order = round % 2 === 0 ? [0, 1] as const : [1, 0] as const
    for (const k of order) figures[k].push(await (k === 0 ? a : b).round(round))
  }
  return figures
}

/** Each workload's operations per round: its pass's size split over the rounds (W3 in whole batches). */
export function perRoundOf(workload: PairedWorkload, s: RunSettings['sizes']): number {
  const split = (n: number) => Math.ceil(n / PAIRED_ROUNDS)
  switch (workload) {
    case 'W1': return split(s.w1Adds)
    case 'W2': return split(s.w2Adds)
    case 'W3': return Math.ceil(split(s.w3Jobs) / s.bulkBatch) * s.bulkBatch
    case 'W5': return Math.ceil(split(s.w5Adds) / 10) * 10
    case 'W6': return split(s.w6Samples)
  }
}

/**
 * `workload` paired with its limit in `mode`: a fresh database migrated by pgonce, both sides warmed, the mode's
 * maintenance, then PAIRED_ROUNDS rounds, each side once per round, in alternating order, each round the workload's
 * pass split over the rounds (perRoundOf).
 */
export async function measurePaired(serverUrl: string, settings: RunSettings, mode: Mode, workload: PairedWorkload): Promise<PairedShare> {
  const s = settings.sizes
  const perRound = perRoundOf(workload, s)
  const database = `pgonce_bench_paired_${workload.toLowerCase()}`
  const url = await freshDatabase(serverUrl, database)
  try {
    const system = await pgonce.open(url, 'default')
    // `client` only reads the table's columns and runs the mode's maintenance: every limit sends its statements over
    // clients of its own that run nothing else (a session that had run that catalog query inserted 1,000-row batches at
    // ~55–65% of a clean one's rate: bench/README.md, "W3's limit and the connection it ran on").
    const client = await connect(url)
    try {
      const sql = await statementsFor(client)
      const pair = workload === 'W1' ? await adds(system, url, sql.insertOne, perRound, 'w1', 1, null)
        : workload === 'W2' ? await adds(system, url, sql.insertOne, perRound, 'w2', s.producers, null)
        : workload === 'W5' ? await adds(system, url, sql.insertOne, perRound, 'w5', s.producers, { keys: perRound / 10 })
        : workload === 'W3' ? await bulkAdds(system, url, sql.insertMany, perRound, s.bulkBatch)
        : await pickupLatency(system, url, sql.insertNotify, perRound, s.w6PauseMs)
      try {
        await pair.limit.warm()
        await pair.pgonce.warm()
        await maintain(client, mode)
        const [limit, ours] = await alternate(pair.limit, pair.pgonce)
        return { workload, mode, perRound, pgonce: ours, limit }
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
