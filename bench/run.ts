// `npm run bench`: the workloads on pgonce and its peers, each system in every configuration that competes in a
// workload (a pass per configuration and mode, in fresh databases of one server), then the paired rounds of pgonce
// against the best peer, the physical limit and (BENCH_BASELINE) an earlier commit of pgonce. Prints one table on
// stdout, progress on stderr, and writes every figure to bench/results/.

import { execFileSync } from 'node:child_process'
import { startPostgres } from '../dev/postgres-server.js'
import { type Baseline, checkOutBaseline } from './baseline.js'
import { settingsFromEnv } from './config.js'
import { describeMachine, redisVersion } from './machine.js'
import { errorText } from './measure.js'
import { log, runPass, workloadsOf } from './pass.js'
import { renderMarkdown } from './report.js'
import type { BenchRun, SystemRun } from './results.js'
import { resultStem, writeResultFile } from './results.js'
import { type Ran, type RoundsResult, contenders, runRounds } from './rounds.js'
import { allSystems } from './systems/registry.js'
import { WORKLOAD_IDS } from './systems/system.js'

/** The working tree's commit, marked when src/, sql/ or migrations/ have uncommitted changes. */
function code(): string {
  const git = (...args: string[]) =>
    execFileSync('git', args, { cwd: new URL('../', import.meta.url), encoding: 'utf8' }).trim()
  try {
    return `${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--', 'src', 'sql', 'migrations') ? ' (modified)' : ''}`
  } catch {
    return 'unknown'
  }
}

const settings = settingsFromEnv()
const startedAt = new Date()
const server = await startPostgres(log)
let baseline: Baseline | null = null
try {
  const redis = await redisVersion(settings.redisUrl)
  const machine = await describeMachine(server.url, server.kind, redis)
  log(`sizes ${JSON.stringify(settings.sizes)}; modes ${settings.modes.join(', ')}; ${settings.rounds} rounds`)
  if (settings.baseline) baseline = await checkOutBaseline(settings.baseline, log)
  // The baseline runs whenever pgonce does; the Redis reference when Redis answers.
  const chosen = allSystems()
    .filter(
      (s) =>
        !settings.systems ||
        settings.systems.includes(s.id) ||
        (s.id === 'pgonce-baseline' && settings.systems.includes('pgonce')),
    )
    .filter((s) => s.backend === 'postgres' || redis !== null)
  const ran: Ran[] = []
  const systems: SystemRun[] = []
  let letter = 0
  for (const info of chosen) {
    const configs = info.configs
      .map((c) => ({ ...c, letter: String.fromCharCode(97 + letter++), workloads: workloadsOf(c, settings) }))
      .filter((c) => c.workloads.length > 0)
    const run: SystemRun = {
      id: info.id,
      label: info.label,
      backend: info.backend,
      common: info.common,
      configs,
      passes: [],
    }
    for (const config of configs) {
      for (const mode of settings.modes) {
        // Redis has no tables to vacuum: its reference column runs as is only.
        if (info.backend === 'redis' && mode === 'analysed') continue
        run.passes.push(
          await runPass({ info, config: config.key, mode }, config.workloads, server.url, settings, config.letter),
        )
      }
    }
    systems.push(run)
    ran.push({ info, configs, passes: run.passes })
  }
  const rounds: RoundsResult[] = []
  const errors: string[] = []
  if (settings.rounds > 0) {
    for (const id of WORKLOAD_IDS) {
      for (const mode of settings.modes) {
        const entrants = contenders(ran, id, mode)
        if (entrants.length < 2) continue
        try {
          rounds.push(await runRounds(id, mode, entrants, server.url, settings, log))
        } catch (err) {
          errors.push(`rounds of ${id} ${mode}: ${errorText(err)}`)
          log(`rounds of ${id} ${mode} failed: ${errorText(err)}`)
        }
      }
    }
  }
  const run: BenchRun = {
    startedAt: startedAt.toISOString(),
    seconds: (Date.now() - startedAt.getTime()) / 1000,
    code: code(),
    machine,
    scale: settings.scale,
    sizes: settings.sizes,
    modes: settings.modes,
    baseline: baseline && { ref: baseline.ref, sha: baseline.sha },
    systems,
    rounds,
    errors,
  }
  process.stdout.write(`${renderMarkdown(run)}\n`)
  const partial = Boolean(settings.systems || settings.workloads || settings.modes.length < 2)
  writeResultFile(
    resultStem('', startedAt, machine.host, settings.scale, partial),
    run,
    partial || settings.scale !== 1,
    log,
  )
} finally {
  await baseline?.remove()
  await server.stop()
}
