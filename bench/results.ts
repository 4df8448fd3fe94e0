// Writes a run's JSON under bench/results/.

import { mkdirSync, writeFileSync } from 'node:fs'
import type { Baseline } from './baseline.js'
import type { RunSettings } from './config.js'
import type { BaselineInfo, Machine, RunHeader } from './run-result.js'

/** The header of a run that started at `startedAt` and ends now. */
export function runHeader(startedAt: Date, machine: Machine, settings: RunSettings): RunHeader {
  return {
    startedAt: startedAt.toISOString(),
    seconds: (Date.now() - startedAt.getTime()) / 1000,
    machine,
    scale: settings.scale,
    sizes: settings.sizes,
    modes: settings.modes,
  }
}

/** What a run's JSON keeps of a baseline checkout. */
export const baselineInfo = (b: Baseline): BaselineInfo =>
  ({ ref: b.ref, sha: b.sha, short: b.short, lockfileDiffers: b.lockfileDiffers })

/**
 * Writes `data` to bench/results/<stem>.json. With `replace` (a partial run) it overwrites the previous file of that
 * name; otherwise it never overwrites an earlier run of the same name and takes the next free -2, -3, ….
 */
export function writeResultFile(stem: string, data: unknown, replace: boolean, log: (message: string) => void): void {
  const dir = new URL('./results/', import.meta.url)
  mkdirSync(dir, { recursive: true })
  const safe = stem.replace(/[^A-Za-z0-9_.-]/g, '_')
  const text = `${JSON.stringify(data, null, 2)}\n`
  for (let n = 1; ; n++) {
    const file = new URL(`${safe}${n === 1 ? '' : `-${n}`}.json`, dir)
    try {
      writeFileSync(file, text, { flag: replace ? 'w' : 'wx' })
      log(`wrote ${file.pathname}`)
      return
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
}
