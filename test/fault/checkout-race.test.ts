// Fault suite, a defect found by the chaos run (a worker process exited with an uncaught "terminating connection due
// to administrator command" under load) and pinned here deterministically: pg-pool hands a released client to the
// next waiting `pool.connect()` from inside that client's own socket read, removing its idle 'error' listener; a
// promise-based checkout attaches its own listener a microtask later. When the backend's FATAL message sits in the
// same read as the end of the previous query (a busy process reads both at once), it is emitted in between, with no
// listener: the process crashes. Guarantee: db/checkout.ts listens from the moment the pool hands the client over,
// so a terminated backend never escapes as an uncaught 'error' event.

import { describe, expect, it } from 'vitest'
import { databaseUrl } from '../helpers/schema.js'
import { exited, spawnFixture } from '../helpers/processes.js'

describe('a client handed over by the pool while its backend is terminated', () => {
  it('never crashes the process (withClient listens from the hand-over on)', async () => {
    const child = spawnFixture('fault-checkout-race.ts', { PGONCE_URL: databaseUrl(), ROUNDS: '3' })
    const code = await exited(child)
    expect(child.output()).toContain('survived')
    expect(code).toBe(0)
  }, 30_000)
})
