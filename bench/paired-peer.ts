// W5 and W6 paired with their best peer: pgonce against the peer that was best at the workload in the run's passes,
// in that configuration, alternated in rounds. Their peer parts are otherwise one pass of each system, minutes apart:
// W6's ratio moved by ~0.3 between full runs on this VM, W5's from 2.0–2.4× to 1.36× (bench/README.md, "Paired with
// the limit").

import { connect } from '../dev/postgres-server.js'
import type { RunSettings } from './config.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { PAIRED_ROUNDS, type Side, WARMUP, addSide, alternate, geometricMean, handlerStartSide, perRoundOf, roundRatios } from './paired.js'
import { pgonce } from './systems/pgonce.js'
import type { SystemId, SystemInfo } from './systems/system.js'
import { type Mode, maintain } from './workloads/context.js'

export const PEER_PAIRED_WORKLOADS = ['W5', 'W6'] as const
export type PeerPairedWorkload = (typeof PEER_PAIRED_WORKLOADS)[number]

/** W5 or W6 in `mode`, pgonce against `peer` in its configuration `config` (the letter the table shows it by). */
export interface PeerPairedShare {
  workload: PeerPairedWorkload
  mode: Mode
  peer: PeerShown
  /** Operations per round and side (W5: adds, W6: samples). */
  perRound: number
  /** pgonce's figure in each round: W5 adds per second, W6 the p50 of the round's samples in ms. */
  pgonce: number[]
  /** The peer's, the same way (runs before 2026-12-05's third, W6 only, named it peerP50s). */
  peerFigures?: number[]
  peerP50s?: number[]
}

/** The peer to pair a workload with in a mode: the best Postgres peer's system and configuration there. */
export interface PeerChoice {
  info: SystemInfo
  config: string
  letter: string
}

/** How a result file names the peer it was paired with. */
export interface PeerShown {
  id: SystemId
  label: string
  config: string
  letter: string
}

export const shownPeer = (peer: PeerChoice): PeerShown => ({ id: peer.info.id, label: peer.info.label, config: peer.config, letter: peer.letter })

/** The peer's figures, round by round. */
export const peerFiguresOf = (p: PeerPairedShare): number[] => p.peerFigures ?? p.peerP50s ?? []

/** pgonce's figure ÷ the peer's, round by round (W5: above 1, W6: below 1 is pgonce faster). */
export const peerRatios = (p: PeerPairedShare): number[] => roundRatios(p.pgonce, peerFiguresOf(p))

/** The geometric mean of the rounds' ratios. */
export const peerRatio = (p: PeerPairedShare): number => geometricMean(peerRatios(p))

/** `info` in configuration `config` on a fresh database `name`: its side of `workload`, and how to close it all. */
async function openSide(serverUrl: string, name: string, info: SystemInfo, config: string, settings: RunSettings, workload: PeerPairedWorkload) {
  const url = await freshDatabase(serverUrl, name)
  const system = await info.open(url, config)
  const s = settings.sizes
  const perRound = perRoundOf(workload, s)
  const keys = perRound / 10
  const { side, close } = workload === 'W6'
    ? await handlerStartSide(system, perRound, s.w6PauseMs)
    : { side: addSide(system, 'w5', perRound, s.producers, { keys }), close: async () => {} }
  /** W5: one job per key, as its pass checks (the warm-up's keys and every round's own). */
  const check = async (): Promise<void> => {
    if (workload !== 'W5') return
    const [created, expected] = [await system.countJobs('w5'), Math.min(WARMUP, keys) + PAIRED_ROUNDS * keys]
    if (created !== expected) throw new Error(`${info.label}: ${created} jobs created over ${expected} keys in the W5 rounds`)
  }
  return { url, side, check, close: async () => { await close(); await system.close() } }
}

/**
 * Each system in a fresh database of its own on the same server (W6: its consumer in this process), both warmed, the
 * mode's maintenance in both databases, then PAIRED_ROUNDS rounds of the workload on each, the peer first in even rounds.
 * Throws when a W5 side created other than one job per key.
 */
export async function measurePairedPeer(serverUrl: string, settings: RunSettings, mode: Mode, workload: PeerPairedWorkload,
  peer: PeerChoice): Promise<PeerPairedShare> {
  const w = workload.toLowerCase()
  const names = { ours: `pgonce_bench_paired_${w}_pgonce`, theirs: `pgonce_bench_paired_${w}_peer` }
  const opened: { url: string; side: Side; check(): Promise<void>; close(): Promise<void> }[] = []
  try {
    opened.push(await openSide(serverUrl, names.ours, pgonce, 'default', settings, workload))
    opened.push(await openSide(serverUrl, names.theirs, peer.info, peer.config, settings, workload))
    const [ours, theirs] = opened as [(typeof opened)[0], (typeof opened)[0]]
    await theirs.side.warm()
    await ours.side.warm()
    for (const { url } of opened) {
      const admin = await connect(url)
      await maintain(admin, mode).finally(() => admin.end())
    }
    const [peerFigures, pgonceFigures] = await alternate(theirs.side, ours.side)
    for (const o of opened) await o.check()
    return {
      workload, mode, perRound: perRoundOf(workload, settings.sizes), pgonce: pgonceFigures, peerFigures, peer: shownPeer(peer),
    }
  } finally {
    for (const o of opened) await o.close().catch(() => {})
    await dropDatabase(serverUrl, names.ours)
    await dropDatabase(serverUrl, names.theirs)
  }
}
