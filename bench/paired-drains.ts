// W4 and W8 paired: pgonce's drain and the best peer's and the claim-and-delete loop, one after another in rounds, the
// order rotating. Their targets are otherwise judged on single passes minutes apart; W4 against graphile-worker read
// 0.77× to 1.09× analysed over the full runs of 2026-12-04/05 (bench/README.md, "The drains paired"). Each side runs
// every configuration that came within CLOSE_CONFIGS of its best pass at the workload and mode, and is represented by the
// one with the best geometric mean over the rounds: one pass apiece decided it before, and pgonce's two drain
// configurations, ~1.1× apart, swapped places between single passes (bench/README.md, "The drains paired").

import type { RunSettings } from './config.js'
import { measureClaimDelete } from './limits.js'
import { geometricMean, roundRatios } from './paired.js'
import { runDrainAlone } from './pass.js'
import { pgonce } from './systems/pgonce.js'
import { type PeerChoice, type PeerShown, shownPeer } from './paired-peer.js'
import type { Mode } from './workloads/context.js'

/** Rounds; each places every side in every position at least once when there are up to six sides. */
export const DRAIN_ROUNDS = 6
export const PAIRED_DRAINS = ['W4', 'W8'] as const
export type DrainWorkload = (typeof PAIRED_DRAINS)[number]
/**
 * A configuration joins the rounds when its pass came within this factor of its side's best pass (pgonce's two drain
 * configurations, or two of a peer's; the peers' other configurations were 3–30× slower at W4 and W8 in every run).
 */
export const CLOSE_CONFIGS = 1.3

/** pgonce's configuration for the rounds: its key, and its letter in the table. */
export interface OurConfig {
  config: string
  letter: string
}

/** A configuration that ran in the rounds, and its jobs per second in each round. */
export interface RoundsCandidate<C> {
  config: C
  rates: number[]
}

export interface DrainPairedShare {
  workload: DrainWorkload
  mode: Mode
  peer: PeerShown
  /**
   * pgonce's configuration in these rounds: since 2026-12-05 (later) the one with the best geometric mean over them;
   * before, the one best at the workload in that mode's passes (absent before 2026-12-05: `default`).
   */
  ours?: OurConfig
  /** Jobs per second in each round: pgonce's drain (in `ours`), the peer's (in `peer`), and the claim-and-delete loop's. */
  pgonce: number[]
  peerRates: number[]
  loop: number[]
  /** Since 2026-12-05 (later): every configuration of each side that ran in the rounds, the chosen ones included. */
  oursCandidates?: RoundsCandidate<OurConfig>[]
  peerCandidates?: RoundsCandidate<PeerShown>[]
}

/** pgonce ÷ the peer, and pgonce ÷ the loop, round by round (above 1: pgonce is faster). */
export const drainPeerRatios = (p: DrainPairedShare): number[] => roundRatios(p.pgonce, p.peerRates)
export const drainLoopRatios = (p: DrainPairedShare): number[] => roundRatios(p.pgonce, p.loop)
export const drainPeerRatio = (p: DrainPairedShare): number => geometricMean(drainPeerRatios(p))
export const drainLoopShare = (p: DrainPairedShare): number => geometricMean(drainLoopRatios(p))

/** The candidate with the best geometric mean of its rates (the first among equals). */
export function bestOfRounds<C>(candidates: readonly RoundsCandidate<C>[]): RoundsCandidate<C> {
  let best = candidates[0]
  if (best === undefined) throw new Error('no configuration ran in the rounds')
  for (const c of candidates) if (geometricMean(c.rates) > geometricMean(best.rates)) best = c
  return best
}

/**
 * `workload` in `mode`, DRAIN_ROUNDS rounds; in each, pgonce's drain in each of `ours`, the peer's in each of `peers`
 * (each exactly as in its pass: a fresh database, the backlog loaded untimed, the mode's maintenance, the consumer in
 * a child process) and the loop (as its limit probe: a fresh database, the same backlog), in the order
 * [...ours, ...peers, loop] rotated by the round's number. Each side is then represented by its configuration with the
 * best geometric mean over the rounds.
 */
export async function measurePairedDrain(serverUrl: string, settings: RunSettings, mode: Mode, workload: DrainWorkload,
  peers: readonly PeerChoice[], ours: readonly OurConfig[], log: (message: string) => void): Promise<DrainPairedShare> {
  const rate = async (r: Promise<{ perSecond?: number }>) => (await r).perSecond as number
  const ourSides = ours.map((config) => ({ config, name: `pgonce [${config.letter}]`, rates: [] as number[],
    run: () => rate(runDrainAlone({ info: pgonce, config: config.config, mode }, workload, serverUrl, settings)) }))
  const peerSides = peers.map((p) => ({ config: shownPeer(p), name: `${p.info.label} [${p.letter}]`, rates: [] as number[],
    run: () => rate(runDrainAlone({ info: p.info, config: p.config, mode }, workload, serverUrl, settings)) }))
  const loop = { name: 'loop', rates: [] as number[], run: () => rate(measureClaimDelete(serverUrl, settings, mode, workload)) }
  const sides: { name: string; rates: number[]; run: () => Promise<number> }[] = [...ourSides, ...peerSides, loop]
  for (let round = 0; round < DRAIN_ROUNDS; round++) {
    for (let k = 0; k < sides.length; k++) {
      const side = sides[(k + round) % sides.length] as (typeof sides)[number]
      side.rates.push(await side.run())
    }
    log(`${workload} paired (${mode}) round ${round + 1}: ${sides.map((s) => `${s.name} ${Math.round(s.rates[round] as number)}`).join(', ')} jobs/s`)
  }
  const candidate = <C>({ config, rates }: { config: C; rates: number[] }): RoundsCandidate<C> => ({ config, rates })
  const [oursCandidates, peerCandidates] = [ourSides.map(candidate), peerSides.map(candidate)]
  const [mine, theirs] = [bestOfRounds(oursCandidates), bestOfRounds(peerCandidates)]
  return { workload, mode, pgonce: mine.rates, peerRates: theirs.rates, loop: loop.rates, peer: theirs.config, ours: mine.config, oursCandidates, peerCandidates }
}
