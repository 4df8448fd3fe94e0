// Every benchmarked system, in table order; the BENCH_BASELINE pgonce joins them when a baseline is checked out.

import { pathToFileURL } from 'node:url'
import { BASELINE_ROOT_ENV, BASELINE_SHA_ENV } from '../baseline.js'
import { bullmqPostgres, bullmqRedis } from './bullmq.js'
import { graphileWorker } from './graphile-worker.js'
import { pgBoss } from './pg-boss.js'
import { pgonce, pgonceSystem } from './pgonce.js'
import type { SystemId, SystemInfo } from './system.js'

let baseline: SystemInfo | null = null

/** The baseline pgonce, when this process (or its parent) checked one out. */
function baselineSystem(): SystemInfo | null {
  const root = process.env[BASELINE_ROOT_ENV]
  const short = process.env[BASELINE_SHA_ENV]
  if (!root || !short) return null
  baseline ??= pgonceSystem('pgonce-baseline', () => `pgonce@${short}`, pathToFileURL(root))
  return baseline
}

export function allSystems(): SystemInfo[] {
  const extra = baselineSystem()
  return [pgonce, ...(extra ? [extra] : []), graphileWorker, pgBoss, bullmqPostgres, bullmqRedis]
}

export function systemById(id: string): SystemInfo {
  const system = allSystems().find((s) => s.id === id)
  if (!system)
    throw new Error(
      `unknown system ${id} (known: ${allSystems()
        .map((s) => s.id)
        .join(', ')})`,
    )
  return system
}

export type { SystemId }
