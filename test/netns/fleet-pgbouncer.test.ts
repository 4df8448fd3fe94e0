// The fleet of fleet.test.ts with its pools behind PgBouncer in transaction mode (docs/scaling.md, "Running a fleet"):
// each host's Worker and Queue reach PgBouncer on the bed's gateway, their LISTEN goes past it to PostgreSQL through
// the host's latency proxy. Every acknowledged add is completed exactly once, and the server sees the hosts' LISTEN
// sessions plus at most PgBouncer's pool, however many connections the hosts' pools open.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Bouncer, pgbouncerBinary, startPgbouncer } from '../helpers/pgbouncer.js'
import { waitFor } from '../helpers/wait.js'
import {
  type Fleet,
  describeTitle,
  expectEachCompletedOnce,
  expectNoCrash,
  fleet,
  sampleConnections,
  skipReason,
  waitAllCompleted,
} from './support.js'

const HOST_ADDS = 150
/** PgBouncer's server connections for the bed's database. */
const BOUNCER_POOL = 6

describe.skipIf(skipReason !== null)(describeTitle('a fleet of 3 hosts behind PgBouncer'), () => {
  let f: Fleet
  let bouncer: Bouncer

  beforeAll(async () => {
    f = await fleet(3, 'netns_bouncer')
    const binary = await pgbouncerBinary()
    if (binary === null) throw new Error('pgbouncer is not installed (.ci/run installs it)')
    bouncer = await startPgbouncer(binary, f.bed.url, BOUNCER_POOL, undefined, f.bed.gateway)
    for (const h of f.bed.hosts) h.proxy.roundTrip(1)
  })
  afterAll(async () => {
    await f?.close()
    await bouncer?.stop()
  })

  it('completes every acknowledged add once, with the server seeing the LISTEN sessions and the bouncer pool only', async () => {
    const connections = sampleConnections(f)
    const hosts = await Promise.all(
      f.bed.hosts.map((h) =>
        f.start(h, { ADDS: String(HOST_ADDS), CONCURRENCY: '8', PGONCE_URL: bouncer.url, LISTEN_URL: h.url }),
      ),
    )
    const acked: string[] = []
    for (const child of hosts) {
      const report = await waitFor(
        () => child.messages().find((m) => 'acked' in m),
        60_000,
        'a host to report its adds',
      )
      acked.push(...(report.acked as string[]))
    }
    expect(acked).toHaveLength(3 * HOST_ADDS)
    await waitAllCompleted(f)
    await expectEachCompletedOnce(f, acked)
    expectNoCrash(f)
    const peak = await connections()
    // docs/scaling.md quotes this line.
    console.log(
      `netns fleet behind PgBouncer (pool ${BOUNCER_POOL}): peak ${peak.listeners} LISTEN + ${peak.others} other connections for 3 hosts`,
    )
    expect(peak.listeners).toBe(3)
    // PgBouncer's pool (and its reserve, which this configuration leaves at 0) is all the rest.
    expect(peak.others).toBeLessThanOrEqual(BOUNCER_POOL)
    expect(await f.stopAll()).toEqual([0, 0, 0])
  })
})
