// Fault suite, everything at once: `npm run chaos` in its 30-second mode (dev/chaos.ts: producers over a small key
// space, 3 worker processes SIGKILLed, frozen and restarted, pgonce's backends terminated, two ctx.effects per job,
// then a drain and a check from the database). Guarantee: its last line is `lost=0 duplicated=0 crashed=0 exceeded=0` and it
// exits 0: every acknowledged add accounted for, each effect applied exactly once, no worker crash.

import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { databaseUrl } from '../helpers/schema.js'
import { repoRoot } from '../helpers/processes.js'

describe('npm run chaos (CHAOS_SECONDS=30)', () => {
  it('ends with lost=0 duplicated=0 crashed=0 exceeded=0', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'dev', 'chaos.ts')], {
      cwd: repoRoot,
      env: { ...process.env, DATABASE_URL: databaseUrl(), CHAOS_SECONDS: '30' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c.toString()))
    child.stderr.on('data', (c: Buffer) => (out += c.toString()))
    const timer = setTimeout(() => child.kill('SIGINT'), 170_000)
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)))
    clearTimeout(timer)
    const lines = out.trim().split('\n')
    expect(lines[lines.length - 1], out).toBe('lost=0 duplicated=0 crashed=0 exceeded=0')
    expect(code, out).toBe(0)
  }, 180_000)
})
