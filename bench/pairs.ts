// `npm run bench:pairs`: the working tree's pgonce against BENCH_BASELINE in alternated pairs of passes, so that
// the VM's drift (it moves single runs by ±15% and more, and a full run's comparison with a baseline flips with the
// order of its passes) falls on both sides alike. Pair i runs the two back to back, the working tree first in even
// pairs and the baseline first in odd ones, each pass exactly as in `npm run bench` (fresh database, CHECKPOINT,
// warm-up, the workloads in table order, W4 and W8 in databases of their own), in every selected mode.
// Prints, per workload and mode, the ratio of each pair (above 1: the working tree is faster), their geometric mean
// and its 95% interval; writes bench/results/pairs-<date>-<host>[-n].json.

import { startPostgres } from '../dev/postgres-server.js'
import { checkOutBaseline } from './baseline.js'
import { settingsFromEnv } from './config.js'
import { describeMachine, redisVersion } from './machine.js'
import { log, runPass, workloadsOf } from './pass.js'
import { type PairedRun, type PairedSystem, renderPairs } from './pairs-report.js'
import { baselineInfo, runHeader, writeResultFile } from './results.js'
import { systemById } from './systems/registry.js'

const settings = settingsFromEnv()
if (!settings.baseline) throw new Error('bench:pairs needs BENCH_BASELINE=<git ref> to compare against')
const pairs = Number(process.env.BENCH_PAIRS ?? 4)
if (!Number.isInteger(pairs) || pairs < 2) throw new Error(`BENCH_PAIRS must be an integer of at least 2, got ${process.env.BENCH_PAIRS}`)

const startedAt = new Date()
const server = await startPostgres(log)
const baseline = await checkOutBaseline(settings.baseline, log)
try {
  const machine = await describeMachine(server.url, server.kind, await redisVersion(settings.redisUrl))
  const [current, base] = [systemById('pgonce'), systemById('pgonce-baseline')]
  const config = current.configs[0]
  if (!config) throw new Error('pgonce has no configuration')
  const workloads = workloadsOf(config, settings)
  log(`${pairs} pairs of ${workloads.join(', ')} in ${settings.modes.join(', ')}; baseline ${baseline.short}`)
  const systems: PairedSystem[] = [current, base].map((info) => ({ id: info.id, label: info.label, passes: [] }))
  for (let i = 0; i < pairs; i++) {
    for (const mode of settings.modes) {
      const order = i % 2 === 0 ? [0, 1] : [1, 0]
      for (const s of order) {
        const info = s === 0 ? current : base
        const pass = await runPass({ info, config: config.key, mode }, workloads, server.url, settings, `${i + 1}`)
        systems[s]?.passes.push({ pair: i, ...pass })
      }
    }
  }
  const run: PairedRun = {
    ...runHeader(startedAt, machine, settings),
    pairs,
    workloads,
    baseline: baselineInfo(baseline),
    systems,
  }
  process.stdout.write(`${renderPairs(run)}\n`)
  writeResultFile(`pairs-${startedAt.toISOString().slice(0, 10)}-${machine.host}${settings.scale === 1 ? '' : `-scale${settings.scale}`}`, run, false, log)
} finally {
  await baseline.remove()
  await server.stop()
}
