// The paired rounds: after the passes, each workload in each mode once more, every contender once per round, the order
// rotating by one each round. Single passes minutes apart moved a ratio by ±15–30% on the 2-core VM this was built on
// (W1's share of its limit read 50–105% over full runs); in rounds the machine's drift falls on every side alike.
// Contenders: pgonce's, the baseline's and the best Postgres peer's configurations whose pass came within CLOSE of
// their side's best, and the workload's physical limit.

import pg from 'pg'
import { type Mode, type RunSettings, type Sizes } from './config.js'
import { benchDatabase, dropDatabase, freshDatabase } from './databases.js'
import { claimDeleteDrain, LIMIT_LABEL, openLimit } from './limits.js'
import { runDrain, type PassRun } from './pass.js'
import { systemById } from './systems/registry.js'
import type { SystemId, SystemInfo, WorkloadId } from './systems/system.js'
import { maintain } from './workloads/context.js'
import { type DrainId, isDrain } from './workloads/drain.js'
import { KIND, type Timed, openTimed } from './workloads/timed.js'

/** A configuration joins the rounds when its pass came within this factor of its side's best pass. */
export const CLOSE = 1.3

export interface Entrant {
  id: SystemId | 'limit'
  label: string
  config: string
  letter: string
}

export interface RoundsResult {
  workload: WorkloadId
  mode: Mode
  /** Operations per round and entrant (a drain is a whole backlog each round). */
  perRound: number
  /** Each entrant's figure per round: ops/s, or the round's p50 in ms. */
  entrants: (Entrant & { figures: number[] })[]
}

/** What the passes ran: a system, its configurations' letters, its passes. */
export interface Ran {
  info: SystemInfo
  configs: { key: string; letter: string }[]
  passes: PassRun[]
}

interface Opened {
  timed: Timed
  maintain(): Promise<void>
}

/** The figure a workload is ranked by, and whether `a` is better than `b` by it. */
export const valueOf = (id: WorkloadId, f: { perSecond?: number; p50Ms?: number } | undefined): number | undefined => {
  const v = KIND[id] === 'rate' ? f?.perSecond : f?.p50Ms
  return v !== undefined && Number.isFinite(v) ? v : undefined
}
export const better = (id: WorkloadId, a: number, b: number): boolean => (KIND[id] === 'rate' ? a > b : a < b)

/** Operations per round: the pass's size split over the rounds (W3 in whole batches, W5 in tens). */
export function perRoundOf(id: WorkloadId, s: Sizes, rounds: number): number {
  const split = (n: number) => Math.ceil(n / rounds)
  switch (id) {
    case 'W1':
      return split(s.w1Adds)
    case 'W2':
      return split(s.w2Adds)
    case 'W3':
      return Math.ceil(split(s.w3Jobs) / s.bulkBatch) * s.bulkBatch
    case 'W5':
      return Math.ceil(split(s.w5Adds) / 10) * 10
    case 'W6':
      return split(s.w6Samples)
    case 'W7':
      return split(s.w7Samples)
    case 'W4':
    case 'W4B':
      return s.w4Jobs
    case 'W8':
      return s.w8Window
  }
}

/** The configurations of `group` whose correct pass at `id` in `mode` came within `close` of the group's best. */
function closeConfigs(group: Ran[], id: WorkloadId, mode: Mode, close = CLOSE): Entrant[] {
  const ran = group.flatMap((r) =>
    r.passes
      .filter((p) => p.mode === mode && p.workloads[id]?.correct)
      .flatMap((p) => {
        const value = valueOf(id, p.workloads[id])
        const letter = r.configs.find((c) => c.key === p.config)?.letter ?? '?'
        return value === undefined
          ? []
          : [{ entrant: { id: r.info.id, label: r.info.label, config: p.config, letter }, value }]
      }),
  )
  const best = ran.reduce<number | undefined>(
    (b, x) => (b === undefined || better(id, x.value, b) ? x.value : b),
    undefined,
  )
  if (best === undefined) return []
  return ran
    .filter((x) => (KIND[id] === 'rate' ? x.value * close >= best : x.value <= best * close))
    .map((x) => x.entrant)
}

/**
 * The contenders for `id` in `mode`: pgonce's and the baseline's close configurations, the best Postgres peer's
 * (one system: the sides of an add workload are open at once, each with its pool, and a server's 100 connections
 * did not hold four peers' pools beside pgonce's and the limit's), and the limit.
 */
export function contenders(ran: Ran[], id: WorkloadId, mode: Mode): Entrant[] {
  const own = (sid: SystemId) => ran.filter((r) => r.info.id === sid)
  const peers = ran.filter(
    (r) => r.info.backend === 'postgres' && r.info.id !== 'pgonce' && r.info.id !== 'pgonce-baseline',
  )
  const [bestPeer] = closeConfigs(peers, id, mode, 1)
  const limit: Entrant[] = LIMIT_LABEL[id] ? [{ id: 'limit', label: 'limit', config: '', letter: '' }] : []
  const ours = closeConfigs(own('pgonce'), id, mode)
  if (ours.length === 0) return []
  const peer = bestPeer ? closeConfigs(own(bestPeer.id as SystemId), id, mode) : []
  return [...ours, ...closeConfigs(own('pgonce-baseline'), id, mode), ...peer, ...limit]
}

/** A drain as a round's side: each round one whole drain in a fresh database. */
const drainSide = (drain: () => Promise<number>): Opened => ({
  timed: {
    warm: async () => {},
    run: async () => ({ perSecond: await drain() }),
    check: async () => null,
    close: async () => {},
  },
  maintain: async () => {},
})

/** A system in a configuration, opened for `id` in a fresh database of its own (the `k`th of the rounds'). */
async function openSystem(
  info: SystemInfo,
  config: string,
  id: Exclude<WorkloadId, DrainId>,
  k: number,
  serverUrl: string,
  settings: RunSettings,
  mode: Mode,
): Promise<Opened> {
  const database = benchDatabase(`round_${k}`)
  const url = await freshDatabase(serverUrl, database)
  const admin = new pg.Pool({ connectionString: url, max: 1 })
  admin.on('error', () => {})
  const cleanup = () => admin.end().finally(() => dropDatabase(serverUrl, database))
  try {
    const system = await info.open(url, config)
    const timed = await openTimed(id, system, settings.sizes).catch(async (err) => {
      await system.close()
      throw err
    })
    return {
      timed: {
        ...timed,
        close: () =>
          timed
            .close()
            .finally(() => system.close())
            .finally(cleanup),
      },
      maintain: () => maintain(admin, mode),
    }
  } catch (err) {
    await cleanup()
    throw err
  }
}

function open(
  e: Entrant,
  k: number,
  id: WorkloadId,
  mode: Mode,
  serverUrl: string,
  settings: RunSettings,
): Promise<Opened> | Opened {
  if (e.id === 'limit') {
    if (isDrain(id)) return drainSide(() => claimDeleteDrain(serverUrl, id, settings.sizes, mode))
    if (id === 'W7') throw new Error('W7 has no limit')
    return openLimit(id, serverUrl, settings.sizes, mode)
  }
  const info = systemById(e.id)
  if (isDrain(id))
    return drainSide(
      async () => (await runDrain({ info, config: e.config, mode }, id, serverUrl, settings)).perSecond ?? 0,
    )
  return openSystem(info, e.config, id, k, serverUrl, settings, mode)
}

const name = (e: Entrant): string => (e.id === 'limit' ? 'limit' : `${e.label} [${e.letter}]`)

/**
 * `id` in `mode`: every entrant opened and warmed, the mode's maintenance in each database, then `rounds` rounds, each
 * entrant once per round in the order rotated by the round's number; every outcome checked at the end.
 */
export async function runRounds(
  id: WorkloadId,
  mode: Mode,
  entrants: Entrant[],
  serverUrl: string,
  settings: RunSettings,
  log: (message: string) => void,
): Promise<RoundsResult> {
  const perRound = perRoundOf(id, settings.sizes, settings.rounds)
  const opened: Opened[] = []
  try {
    for (const [k, e] of entrants.entries()) opened.push(await open(e, k, id, mode, serverUrl, settings))
    for (const o of opened) {
      await o.timed.warm()
      await o.maintain()
    }
    const figures = entrants.map((): number[] => [])
    for (let round = 0; round < settings.rounds; round++) {
      for (let j = 0; j < entrants.length; j++) {
        const k = (j + round) % entrants.length
        const figure = valueOf(id, await (opened[k] as Opened).timed.run(perRound, round * perRound))
        figures[k]?.push(figure ?? Number.NaN)
      }
      log(
        `${id} ${mode} round ${round + 1}: ${entrants.map((e, k) => `${name(e)} ${figures[k]?.[round]?.toFixed(KIND[id] === 'rate' ? 0 : 2)}`).join(', ')}`,
      )
    }
    for (const [k, o] of opened.entries()) {
      const wrong = await o.timed.check()
      if (wrong) throw new Error(`${name(entrants[k] as Entrant)}: ${wrong}`)
    }
    return { workload: id, mode, perRound, entrants: entrants.map((e, k) => ({ ...e, figures: figures[k] ?? [] })) }
  } finally {
    for (const o of opened) await o.timed.close().catch((err: Error) => log(`closing a side of ${id}: ${err.message}`))
  }
}
