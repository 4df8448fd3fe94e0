// BENCH_BASELINE=<git ref>: a checkout of pgonce at that ref (a detached git worktree in a temp directory, with a link
// to this repository's node_modules; its src/ is imported through tsx), run as one more system in the same passes and
// paired rounds as the working tree.

import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const exec = promisify(execFile)
const REPO = fileURLToPath(new URL('../', import.meta.url))

/** What the drain child processes need to rebuild the baseline system: set in the environment they inherit. */
export const BASELINE_ROOT_ENV = 'BENCH_BASELINE_ROOT'
export const BASELINE_SHA_ENV = 'BENCH_BASELINE_SHA'

export interface Baseline {
  ref: string
  sha: string
  short: string
  /** The checkout, ending in `/`. */
  root: string
  /** Whether the ref's package-lock.json differs from the working tree's (its node_modules is ours either way). */
  lockfileDiffers: boolean
  remove(): Promise<void>
}

const git = async (...args: string[]): Promise<string> => (await exec('git', args, { cwd: REPO })).stdout.trim()

export async function checkOutBaseline(ref: string, log: (message: string) => void): Promise<Baseline> {
  const sha = await git('rev-parse', '--verify', `${ref}^{commit}`)
  const short = await git('rev-parse', '--short', sha)
  const dir = mkdtempSync(join(tmpdir(), `pgonce-baseline-${short}-`))
  await git('worktree', 'add', '--detach', dir, sha)
  // Its own npm ci would take minutes and the network; a link keeps every library (pg included) the same instance.
  symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'), 'dir')
  let lockfileDiffers = false
  try {
    await git('diff', '--quiet', sha, '--', 'package-lock.json')
  } catch {
    lockfileDiffers = true
  }
  log(
    `baseline ${ref} = ${short}, checked out in ${dir}${lockfileDiffers ? ' (its package-lock.json differs from ours: it runs on our node_modules)' : ''}`,
  )
  process.env[BASELINE_ROOT_ENV] = `${dir}/`
  process.env[BASELINE_SHA_ENV] = short
  return {
    ref,
    sha,
    short,
    root: `${dir}/`,
    lockfileDiffers,
    async remove() {
      delete process.env[BASELINE_ROOT_ENV]
      delete process.env[BASELINE_SHA_ENV]
      try {
        await git('worktree', 'remove', '--force', dir)
      } catch (err) {
        log(`could not remove the baseline worktree: ${(err as Error).message}`)
      }
      if (existsSync(dir)) rmSync(dir, { recursive: true, force: true })
    },
  }
}
