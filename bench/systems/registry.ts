// Every benchmarked system, in table order.

import { bullmqPostgres, bullmqRedis } from './bullmq.js'
import { graphileWorker } from './graphile-worker.js'
import { pgBoss } from './pg-boss.js'
import { pgonce } from './pgonce.js'
import type { SystemId, SystemInfo } from './system.js'

export const SYSTEMS: readonly SystemInfo[] = [pgonce, graphileWorker, pgBoss, bullmqPostgres, bullmqRedis]

export function systemById(id: string): SystemInfo {
  const system = SYSTEMS.find((s) => s.id === id)
  if (!system) throw new Error(`unknown system ${id} (known: ${SYSTEMS.map((s) => s.id).join(', ')})`)
  return system
}

export type { SystemId }
