// A Worker whose database cannot be reached reports it loudly by default: with no 'error' listener and no logger,
// on stderr (rate-limited); with a listener, through it; it never crashes the process.

import { describe, expect, it } from 'vitest'
import { exited, spawnFixture } from './helpers/processes.js'
import { waitFor } from './helpers/wait.js'

describe('a worker that cannot reach its database', () => {
  it('with no listener and no logger: says so on stderr, a line at a time, and keeps running', async () => {
    const child = spawnFixture('unreachable-worker.ts', { MODE: 'silent' })
    try {
      await waitFor(() => child.output().includes('pgonce worker error:'), 10_000, 'the error on stderr')
      expect(child.output()).toMatch(/pgonce worker error: .*ECONNREFUSED|connect/i)
      // Rate-limited: retries go on (every 100 ms, backing off) but one line per 10 s. A window of time on purpose.
      await new Promise((r) => setTimeout(r, 1_500))
      expect(child.output().match(/pgonce worker error:/g)).toHaveLength(1)
      expect(child.exitCode).toBeNull()
    } finally {
      child.kill('SIGTERM')
      await exited(child)
    }
  })

  it("with an 'error' listener: every failure goes to it, nothing to stderr", async () => {
    const child = spawnFixture('unreachable-worker.ts', { MODE: 'listener' })
    try {
      await waitFor(() => (child.output().match(/listener got/g) ?? []).length >= 3, 10_000, 'three reported failures')
      expect(child.output()).not.toContain('pgonce worker error:')
      expect(child.exitCode).toBeNull()
    } finally {
      child.kill('SIGTERM')
      await exited(child)
    }
  })
})
