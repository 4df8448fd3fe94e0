// The shape of one run (what the table is rendered from and bench/results/*.json holds), and writing it there.

import { mkdirSync, writeFileSync } from 'node:fs'
import type { Mode, Sizes } from './config.js'
import type { PassRun } from './pass.js'
import type { RoundsResult } from './rounds.js'
import type { SystemId, WorkloadId } from './systems/system.js'

export interface Machine {
  host: string
  cpus: number
  cpuModel: string
  memoryGb: number
  node: string
  postgres: string
  /** How the server was reached: DATABASE_URL, a container, or embedded binaries. */
  postgresKind: string
  redis: string | null
}

/** One configuration of one system, as run, with the letter it has in the table. */
export interface ConfigRun {
  key: string
  letter: string
  purpose: string
  lines: string[]
  workloads: WorkloadId[]
}

export interface SystemRun {
  id: SystemId
  label: string
  backend: 'postgres' | 'redis'
  common: string[]
  configs: ConfigRun[]
  passes: PassRun[]
}

export interface BenchRun {
  startedAt: string
  seconds: number
  /** The commit of the working tree, and whether src/, sql/ or migrations/ had uncommitted changes. */
  code: string
  machine: Machine
  scale: number
  sizes: Sizes
  modes: Mode[]
  /** BENCH_BASELINE: the ref and the commit it named. */
  baseline: { ref: string; sha: string } | null
  systems: SystemRun[]
  /** The paired rounds, one per workload and mode (empty with BENCH_ROUNDS=0). */
  rounds: RoundsResult[]
  /** Rounds that failed, with why. */
  errors: string[]
}

/**
 * Writes `data` to bench/results/<stem>.json. With `replace` (a scaled or partial run) it overwrites the file of that
 * name; otherwise it never overwrites an earlier run and takes the next free -2, -3, ….
 */
export function writeResultFile(stem: string, data: unknown, replace: boolean, log: (message: string) => void): void {
  const dir = new URL('./results/', import.meta.url)
  mkdirSync(dir, { recursive: true })
  const safe = stem.replace(/[^A-Za-z0-9_.-]/g, '_')
  for (let n = 1; ; n++) {
    const file = new URL(`${safe}${n === 1 ? '' : `-${n}`}.json`, dir)
    try {
      writeFileSync(file, `${JSON.stringify(data, null, 2)}\n`, { flag: replace ? 'w' : 'wx' })
      log(`wrote ${file.pathname}`)
      return
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
}

/** `<date>-<host>[-scale<x>][-partial]`: the name a run's file starts with. */
export const resultStem = (prefix: string, startedAt: Date, host: string, scale: number, partial: boolean): string =>
  `${prefix}${startedAt.toISOString().slice(0, 10)}-${host}${scale === 1 ? '' : `-scale${scale}`}${partial ? '-partial' : ''}`
