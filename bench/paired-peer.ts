// W6 paired with its best peer: pgonce's add → handler start against the peer that was best at W6 in the run's
// passes, in that configuration, alternated in rounds. W6's peer part is otherwise one pass of each system, minutes
// apart: its ratio moved by ~0.3 between full runs on this VM (bench/README.md, "Paired with the limit").

import type { RunSettings } from './config.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { connect } from './limits.js'
import { type Side, alternate, geometricMean, handlerStartSide, perRoundOf, roundRatios } from './paired.js'
import { pgonce } from './systems/pgonce.js'
import type { SystemId, SystemInfo } from './systems/system.js'
import { type Mode, maintain } from './workloads/context.js'

/** W6 in `mode`, pgonce against `peer` in its configuration `config` (the letter the table shows it by). */
export interface PeerPairedShare {
  workload: 'W6'
  mode: Mode
  peer: { id: SystemId; label: string; config: string; letter: string }
  /** Samples per round and side. */
  perRound: number
  /** The p50 of each round's samples, ms. */
  pgonce: number[]
  peerP50s: number[]
}

/** The peer to pair W6 with in a mode: the best Postgres peer's system and configuration there. */
export interface PeerChoice {
  info: SystemInfo
  config: string
  letter: string
}

/** pgonce's p50 ÷ the peer's, round by round (below 1: pgonce is faster). */
export const peerRatios = (p: PeerPairedShare): number[] => roundRatios(p.pgonce, p.peerP50s)

/** The geometric mean of the rounds' ratios. */
export const peerRatio = (p: PeerPairedShare): number => geometricMean(peerRatios(p))

/** `info` in configuration `config` on a fresh database `name`: its W6 side, and how to close it all. */
async function openSide(serverUrl: string, name: string, info: SystemInfo, config: string, settings: RunSettings) {
  const url = await freshDatabase(serverUrl, name)
  const system = await info.open(url, config)
  const { side, close } = await handlerStartSide(system, perRoundOf('W6', settings.sizes), settings.sizes.w6PauseMs)
  return { url, side, close: async () => { await close(); await system.close() } }
}

/**
 * Each system in a fresh database of its own on the same server, its consumer in this process, both warmed, the mode's
 * maintenance in both databases, then PAIRED_ROUNDS rounds of W6's loop on each, the peer first in even rounds.
 */
export async function measurePairedPeer(serverUrl: string, settings: RunSettings, mode: Mode, peer: PeerChoice): Promise<PeerPairedShare> {
  const names = { ours: 'pgonce_bench_paired_w6_pgonce', theirs: 'pgonce_bench_paired_w6_peer' }
  const opened: { url: string; side: Side; close(): Promise<void> }[] = []
  try {
    opened.push(await openSide(serverUrl, names.ours, pgonce, 'default', settings))
    opened.push(await openSide(serverUrl, names.theirs, peer.info, peer.config, settings))
    const [ours, theirs] = opened as [(typeof opened)[0], (typeof opened)[0]]
    await theirs.side.warm()
    await ours.side.warm()
    for (const { url } of opened) {
      const admin = await connect(url)
      await maintain(admin, mode).finally(() => admin.end())
    }
    const [peerP50s, pgonceP50s] = await alternate(theirs.side, ours.side)
    return {
      workload: 'W6', mode, perRound: perRoundOf('W6', settings.sizes), pgonce: pgonceP50s, peerP50s,
      peer: { id: peer.info.id, label: peer.info.label, config: peer.config, letter: peer.letter },
    }
  } finally {
    for (const o of opened) await o.close().catch(() => {})
    await dropDatabase(serverUrl, names.ours)
    await dropDatabase(serverUrl, names.theirs)
  }
}
