// W1 paired with its limit: pgonce's sequential adds and the bare one-row INSERT into its jobs table, alternated in
// rounds in one database, so that both see the same moment of the machine. W1's own pass and the insert limit are each
// one 2-second sample taken minutes apart; on this VM they moved its share between 50% and 103% over full runs
// (bench/README.md, "W1 paired with its limit").

import pg from 'pg'
import type { RunSettings } from './config.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { perSecond, runProducers } from './measure.js'
import { statementsFor } from './limits.js'
import { pgonce } from './systems/pgonce.js'
import { type Mode, maintain } from './workloads/context.js'

/** Rounds of each side: W1's adds split in this many, the two sides alternating (the limit first in even rounds). */
export const PAIRED_ROUNDS = 8
/** Untimed adds and INSERTs of each side before the first round (the connections and plans warm). */
const WARMUP = 200

export interface PairedShare {
  mode: Mode
  /** Operations per round and side. */
  perRound: number
  /** pgonce's sequential adds/s in each round. */
  pgonce: number[]
  /** The bare one-row INSERT's rate in each round. */
  limit: number[]
}

/** pgonce ÷ limit, round by round. */
export function pairedRatios(p: PairedShare): number[] {
  return p.pgonce.map((v, i) => v / (p.limit[i] as number))
}

/** The geometric mean of the rounds' ratios. */
export function pairedShare(p: PairedShare): number {
  const r = pairedRatios(p)
  return Math.exp(r.reduce((sum, x) => sum + Math.log(x), 0) / r.length)
}

/**
 * `sizes.w1Adds` sequential `queue.add` calls (the W1 pass's system, its defaults) and as many bare INSERTs over one
 * connection (the insert1 limit's statement), in PAIRED_ROUNDS alternated rounds, in a fresh database after `mode`'s
 * maintenance.
 */
export async function measureW1Paired(serverUrl: string, settings: RunSettings, mode: Mode): Promise<PairedShare> {
  const perRound = Math.ceil(settings.sizes.w1Adds / PAIRED_ROUNDS)
  const database = 'pgonce_bench_w1_paired'
  const url = await freshDatabase(serverUrl, database)
  try {
    const system = await pgonce.open(url, 'default')
    const client = new pg.Client({ connectionString: url })
    client.on('error', () => {})
    await client.connect()
    try {
      const sql = await statementsFor(client)
      const insert = (i: number) => client.query({ name: 'paired-insert-one', text: sql.insertOne, values: ['pairedlimit', 'job', JSON.stringify({ i })] })
      await system.prepare('w1')
      for (let i = 0; i < WARMUP; i++) {
        await insert(-1 - i)
        await system.add('w1', { i: -1 - i })
      }
      await maintain(client, mode)
      const result: PairedShare = { mode, perRound, pgonce: [], limit: [] }
      for (let round = 0; round < PAIRED_ROUNDS; round++) {
        const from = round * perRound
        const sides = [
          async () => result.limit.push(perSecond(perRound, await runProducers(perRound, 1, async (i) => { await insert(from + i) }))),
          async () => result.pgonce.push(perSecond(perRound, await runProducers(perRound, 1, (i) => system.add('w1', { i: from + i })))),
        ]
        for (const side of round % 2 === 0 ? sides : sides.reverse()) await side()
      }
      return result
    } finally {
      await client.end()
      await system.close()
    }
  } finally {
    await dropDatabase(serverUrl, database)
  }
}
