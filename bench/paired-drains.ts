// W4 and W8 paired: pgonce's drain and the best peer's (each in the configuration best at that workload and mode in
// the passes) and the claim-and-delete loop, one after another in rounds, the order rotating. Their targets are
// otherwise judged on single passes minutes apart; W4 against graphile-worker read 0.77× to 1.09× analysed over the
// full runs of 2026-12-04/05 (bench/README.md, "The drains paired").

import type { RunSettings } from './config.js'
import { measureClaimDelete } from './limits.js'
import { geometricMean, roundRatios } from './paired.js'
import { runDrainAlone } from './pass.js'
import { pgonce } from './systems/pgonce.js'
import { type PeerChoice, type PeerShown, shownPeer } from './paired-peer.js'
import type { Mode } from './workloads/context.js'

/** Rounds of the three sides; 6 puts each side in each of the three places twice. */
export const DRAIN_ROUNDS = 6
export const PAIRED_DRAINS = ['W4', 'W8'] as const
export type DrainWorkload = (typeof PAIRED_DRAINS)[number]

/** pgonce's configuration for the rounds: its key, and its letter in the table. */
export interface OurConfig {
  config: string
  letter: string
}

export interface DrainPairedShare {
  workload: DrainWorkload
  mode: Mode
  peer: PeerShown
  /** pgonce's configuration in these rounds: the one best at the workload in that mode's passes (absent before 2026-12-05: `default`). */
  ours?: OurConfig
  /** Jobs per second in each round: pgonce's drain, the peer's, and the claim-and-delete loop's. */
  pgonce: number[]
  peerRates: number[]
  loop: number[]
}

/** pgonce ÷ the peer, and pgonce ÷ the loop, round by round (above 1: pgonce is faster). */
export const drainPeerRatios = (p: DrainPairedShare): number[] => roundRatios(p.pgonce, p.peerRates)
export const drainLoopRatios = (p: DrainPairedShare): number[] => roundRatios(p.pgonce, p.loop)
export const drainPeerRatio = (p: DrainPairedShare): number => geometricMean(drainPeerRatios(p))
export const drainLoopShare = (p: DrainPairedShare): number => geometricMean(drainLoopRatios(p))

/**
 * `workload` in `mode`, DRAIN_ROUNDS rounds; in each, pgonce's drain, the peer's (each exactly as in its pass: a fresh
 * database, the backlog loaded untimed, the mode's maintenance, the consumer in a child process) and the loop (as its
 * limit probe: a fresh database, the same backlog), in the order [pgonce, peer, loop] rotated by the round's number.
 */
export async function measurePairedDrain(serverUrl: string, settings: RunSettings, mode: Mode, workload: DrainWorkload,
  peer: PeerChoice, ours: OurConfig, log: (message: string) => void): Promise<DrainPairedShare> {
  const rate = async (r: Promise<{ perSecond?: number }>) => (await r).perSecond as number
  const sides = [
    () => rate(runDrainAlone({ info: pgonce, config: ours.config, mode }, workload, serverUrl, settings)),
    () => rate(runDrainAlone({ info: peer.info, config: peer.config, mode }, workload, serverUrl, settings)),
    () => rate(measureClaimDelete(serverUrl, settings, mode, workload)),
  ] as const
  const figures: [number[], number[], number[]] = [[], [], []]
  for (let round = 0; round < DRAIN_ROUNDS; round++) {
    for (let k = 0; k < 3; k++) {
      const side = ((k + round) % 3) as 0 | 1 | 2
      figures[side].push(await sides[side]())
    }
    const [mine, theirs, loop] = figures.map((f) => Math.round(f[round] as number))
    log(`${workload} paired (${mode}) round ${round + 1}: pgonce [${ours.letter}] ${mine}, ${peer.info.label} ${theirs}, loop ${loop} jobs/s`)
  }
  return { workload, mode, pgonce: figures[0], peerRates: figures[1], loop: figures[2], peer: shownPeer(peer), ours }
}
