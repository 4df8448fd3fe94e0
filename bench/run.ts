// `npm run bench`: the workloads on pgonce and its peers (each peer in every candidate configuration, each in both
// maintenance modes, each pass in fresh databases of one server), the physical limits from Node on pgonce's jobs table,
// and optionally pgonce at BENCH_BASELINE; prints the table, writes bench/results/<date>-<host>[-n].json.

import { startPostgres } from '../dev/postgres-server.js'
import { type Baseline, checkOutBaseline } from './baseline.js'
import { type RunSettings, settingsFromEnv } from './config.js'
import { type LimitPass, measureLimits } from './limits.js'
import { describeMachine, redisVersion } from './machine.js'
import { log, runPass, workloadsOf } from './pass.js'
import { errorText } from './measure.js'
import { measureServerLimits } from './pgbench.js'
import { MODE_LABEL, bestPeerRun, closePassConfigs, peersOf, recordBest, renderMarkdown } from './report.js'
import { baselineInfo, runHeader, writeResultFile } from './results.js'
import type { BenchRun, ConfigRun, SystemRun } from './run-result.js'
import { allSystems } from './systems/registry.js'
import type { SystemInfo } from './systems/system.js'
import { PAIRED_ROUNDS, PAIRED_WORKLOADS, type PairedShare, measurePaired, pairedShare } from './paired.js'
import { PEER_PAIRED_WORKLOADS, type PeerChoice, measurePairedPeer, peerRatio } from './paired-peer.js'
import { CLOSE_CONFIGS, DRAIN_ROUNDS, type OurConfig, PAIRED_DRAINS, drainLoopShare, drainPeerRatio, measurePairedDrain } from './paired-drains.js'
import type { Mode, WorkloadId } from './workloads/context.js'

/** Footnote letters for every configuration of every system, in table order: a, b, c, … */
function assignLetters(systems: SystemInfo[], settings: RunSettings): Map<SystemInfo, ConfigRun[]> {
  const out = new Map<SystemInfo, ConfigRun[]>()
  let n = 0
  for (const info of systems) {
    const configs = settings.firstConfigOnly ? info.configs.slice(0, 1) : info.configs
    out.set(info, configs.map((c) => ({
      key: c.key,
      letter: String.fromCharCode(97 + n++),
      purpose: c.purpose,
      lines: c.lines,
      workloads: workloadsOf(c, settings),
    })).filter((c) => c.workloads.length > 0))
  }
  return out
}

async function benchSystem(info: SystemInfo, configs: ConfigRun[], serverUrl: string, settings: RunSettings): Promise<SystemRun> {
  const run: SystemRun = { id: info.id, label: info.label, backend: info.backend, common: info.common, configs, passes: [], best: {} }
  for (const config of configs) {
    for (const mode of settings.modes) {
      // Redis has no tables to vacuum: its reference column runs as is only.
      if (info.backend === 'redis' && mode === 'analysed') continue
      run.passes.push(await runPass({ info, config: config.key, mode }, config.workloads, serverUrl, settings, config.letter))
    }
  }
  recordBest(run, settings.modes)
  return run
}

function notes(settings: RunSettings, redis: string | null): string[] {
  const s = settings.sizes
  return [
    ...(settings.note ? [settings.note] : []),
    ...(settings.reverse ? ['BENCH_ORDER=reverse: the systems ran in the reverse of the table\'s order (the last column first).'] : []),
    'Each pass (a system in one configuration and one mode) runs alone, in a fresh database of the same server, after a CHECKPOINT and a short untimed warm-up; ' +
      'its workloads run one after another in table order, W4 and W8 each in a fresh database of their own (without the jobs W1–W3 left waiting in other queues).',
    `Modes: "${MODE_LABEL['as-is']}" times each workload on the tables as the earlier ones left them (a fresh table is unanalysed, W8's backlog is not vacuumed); ` +
      `"${MODE_LABEL.analysed}" runs VACUUM ANALYZE on the system's database and a CHECKPOINT right before each timed section (after the backlog is loaded for W4/W8).`,
    'W4 and W8 run the consumer in a child process (also the source of the RSS figures). W4 is timed from the first handler start until the system reports every job completed; ' +
      `W8 from the first handler start to the ${s.w8Window.toLocaleString('en-US')}th.`,
    `W6: producer and worker in one process; each sample waits ${s.w6PauseMs} ms with nothing in flight, then calls add() and waits until add() has returned and the handler has started; ` +
      'latency = add() called → handler started. The INSERT + pg_notify limit runs the same loop (statement returned and notification received on a LISTENing connection).',
    `W6 and W7 time their samples after ${s.warmup} untimed ones of the same kind.`,
    'W5 and W7 use each system\'s own dedup feature (configuration below); a wrong job count is marked ✗.',
    'pgonce ÷ best Postgres peer: the best of graphile-worker, pg-boss and BullMQ-on-PostgreSQL, each at its best configuration for that workload and mode (the letter after the ratio). ' +
      'For W6 and W7 the ratio is of p50 latencies (below 1 is faster).',
    redis
      ? 'BullMQ on Redis is a reference, not a Postgres peer: it is left out of the ratio column.'
      : `Redis did not answer at ${settings.redisUrl}: the BullMQ on Redis reference column was skipped.`,
    ...(s.w8Queued === 0 ? ['W8 skipped (BENCH_W8_SCALE=0).'] : []),
    ...(settings.limits ? [] : ['Physical limits not measured (BENCH_LIMITS=0).']),
    ...(settings.firstConfigOnly ? ['BENCH_CONFIGS=first: each system in its first configuration only (not at its best).'] : []),
  ]
}

function writeResult(run: BenchRun, settings: RunSettings, startedAt: Date): void {
  // A scaled or partial run never overwrites the figures of a full one; a partial run replaces the previous partial one.
  const partial = Boolean(settings.systems || settings.workloads || settings.firstConfigOnly || settings.modes.length < 2)
  const tag = `${settings.scale === 1 ? '' : `-scale${settings.scale}`}${partial ? '-partial' : ''}`
  writeResultFile(`${startedAt.toISOString().slice(0, 10)}-${run.machine.host}${tag}`, run, partial, log)
}

const settings = settingsFromEnv()
const startedAt = new Date()
const server = await startPostgres(log)
let baseline: Baseline | null = null
try {
  const redis = await redisVersion(settings.redisUrl)
  const machine = await describeMachine(server.url, server.kind, redis)
  log(`sizes ${JSON.stringify(settings.sizes)}; modes ${settings.modes.join(', ')}`)
  if (settings.baseline) baseline = await checkOutBaseline(settings.baseline, log)
  const pgbench = settings.pgbenchSeconds > 0
    ? await measureServerLimits(server.url, settings.pgbenchSeconds)
    : { skipped: 'not measured (BENCH_PGBENCH_SECONDS=0)' }
  log(`pgbench reference ${JSON.stringify(pgbench)}`)
  const limits: LimitPass[] = []
  if (settings.limits) for (const mode of settings.modes) limits.push(await measureLimits(server.url, settings, mode, log))
  // The baseline pgonce runs whenever pgonce does.
  const selected = (id: string): boolean => !settings.systems || settings.systems.includes(id) ||
    (id === 'pgonce-baseline' && settings.systems.includes('pgonce'))
  const chosen = allSystems().filter((s) => selected(s.id)).filter((s) => s.backend === 'postgres' || redis !== null)
  const letters = assignLetters(chosen, settings)
  const ran = new Map<SystemInfo, SystemRun>()
  for (const info of settings.reverse ? [...chosen].reverse() : chosen) {
    ran.set(info, await benchSystem(info, letters.get(info) ?? [], server.url, settings))
  }
  const systems = chosen.map((info) => ran.get(info) as SystemRun)
  // The insert limits again, so that a share of the limit is not at the mercy of the VM's pace when the run began.
  const limitsAfter: LimitPass[] = []
  if (settings.limits) for (const mode of settings.modes) limitsAfter.push(await measureLimits(server.url, settings, mode, log, true))
  // What pgonce ran in the passes (this run's workload selection, W8 only with a backlog): the paired rounds below
  // measure those workloads again.
  const pgonceRan = new Set(systems.find((s) => s.id === 'pgonce')?.configs[0]?.workloads ?? [])
  const rounds = <W extends WorkloadId>(ids: readonly W[]): W[] => (settings.limits ? ids.filter((w) => pgonceRan.has(w)) : [])
  // The workloads judged against a limit once more, each alternated with its limit in rounds: their single samples,
  // minutes apart, decide a share by chance (bench/paired.ts).
  const paired: PairedShare[] = []
  for (const workload of rounds(PAIRED_WORKLOADS)) {
    for (const mode of settings.modes) {
      const p = await measurePaired(server.url, settings, mode, workload)
      log(`${workload} paired with its limit (${mode}): ${pairedShare(p).toFixed(2)} over ${PAIRED_ROUNDS} rounds`)
      paired.push(p)
    }
  }
  /**
   * `measure` for each of `workloads` in each mode, against what `choose` picks there from the passes (skipped when it
   * picks nothing); a failed measurement is logged and left out (its target is then judged on the passes).
   */
  async function againstPeers<W extends WorkloadId, C, T>(workloads: readonly W[], choose: (workload: W, mode: Mode) => { named: string; choice: C } | null,
    measure: (mode: Mode, workload: W, choice: C) => Promise<T>, summary: (p: T) => string): Promise<T[]> {
    const out: T[] = []
    for (const workload of rounds(workloads)) {
      for (const mode of settings.modes) {
        const picked = choose(workload, mode)
        if (!picked) continue
        const what = `${workload} paired with ${picked.named} (${mode})`
        try {
          const p = await measure(mode, workload, picked.choice)
          log(`${what}: ${summary(p)}`)
          out.push(p)
        } catch (err) {
          log(`${what} failed: ${errorText(err)}`)
        }
      }
    }
    return out
  }
  const peerChoice = (system: SystemRun, config: ConfigRun): PeerChoice[] => {
    const info = chosen.find((s) => s.id === system.id)
    return info ? [{ info, config: config.key, letter: config.letter }] : []
  }
  const named = (peers: readonly PeerChoice[]): string => peers.map((p) => `${p.info.label} [${p.letter}]`).join(', ')
  // W5's and W6's peer parts: against the peer (and configuration) best at the workload in that mode's passes
  // (bench/paired-peer.ts).
  const pairedPeers = await againstPeers(PEER_PAIRED_WORKLOADS, (workload, mode) => {
    const best = bestPeerRun(systems, workload, mode)
    const config = best?.system.configs.find((c) => c.letter === best.best.letter)
    const [peer] = best && config ? peerChoice(best.system, config) : []
    return peer ? { named: named([peer]), choice: peer } : null
  }, (mode, w, peer) => measurePairedPeer(server.url, settings, mode, w, peer), (p) => `${peerRatio(p).toFixed(2)} over ${PAIRED_ROUNDS} rounds`)
  // And the drains: pgonce, the peer and the claim-and-delete loop in rotating rounds, each side in every configuration
  // that came close to its best pass (bench/paired-drains.ts).
  const pgonceRun = systems.find((s) => s.id === 'pgonce')
  const pairedDrains = await againstPeers(PAIRED_DRAINS, (workload, mode) => {
    const close = (among: SystemRun[]) => closePassConfigs(among, workload, mode, CLOSE_CONFIGS)
    const ours: OurConfig[] = close(pgonceRun ? [pgonceRun] : []).map(({ config }) => ({ config: config.key, letter: config.letter }))
    const peers = close(peersOf(systems)).flatMap(({ system, config }) => peerChoice(system, config))
    return ours.length > 0 && peers.length > 0 ? { named: named(peers), choice: { ours, peers } } : null
  }, (mode, w, { ours, peers }) => measurePairedDrain(server.url, settings, mode, w, peers, ours, log),
  (p) => `pgonce [${p.ours?.letter}] ${drainPeerRatio(p).toFixed(2)}× [${p.peer.letter}], ${drainLoopShare(p).toFixed(2)} of the loop over ${DRAIN_ROUNDS} rounds`)
  const run: BenchRun = {
    ...runHeader(startedAt, machine, settings),
    material: settings.material,
    limits,
    limitsAfter,
    paired,
    pairedPeers,
    pairedDrains,
    pgbench,
    baseline: baseline ? baselineInfo(baseline) : null,
    systems,
    notes: notes(settings, redis),
  }
  process.stdout.write(`${renderMarkdown(run)}\n`)
  writeResult(run, settings, startedAt)
} finally {
  await baseline?.remove()
  await server.stop()
}
