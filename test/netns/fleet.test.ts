// Three worker hosts in network namespaces, each behind its own link to PostgreSQL (~2 ms RTT with jitter, through the
// latency proxy), adding jobs over that link while the test adds more directly: every acknowledged add is completed,
// each exactly once (one committed run, one effect), every host takes part, and all stop cleanly.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../../src/index.js'
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

const HOST_ADDS = 100
const DIRECT_ADDS = 300

describe.skipIf(skipReason !== null)(describeTitle('a fleet of 3 hosts over a shaped network'), () => {
  let f: Fleet

  beforeAll(async () => {
    f = await fleet(3, 'netns_fleet')
    for (const h of f.bed.hosts) h.proxy.roundTrip(2, 1)
  })
  afterAll(async () => {
    await f?.close()
  })

  it('completes every acknowledged add exactly once, on all three hosts', async () => {
    const connections = sampleConnections(f)
    const hosts = await Promise.all(f.bed.hosts.map((h) => f.start(h, { ADDS: String(HOST_ADDS) })))
    const queue = new Queue(f.queue, { connectionString: f.bed.url, schema: f.schema, migrate: false })
    const acked: string[] = []
    try {
      for (let i = 0; i < DIRECT_ADDS; i += 50) {
        const items = Array.from({ length: 50 }, (_, k) => ({
          name: 'direct',
          data: {},
          opts: { jobId: `d-${i + k}` },
        }))
        acked.push(...(await queue.addBulk(items)).map((j) => j.id))
      }
      // The same jobIds again while they may still be live: answered by the jobs already there, never a second job.
      const again = await queue.addBulk([{ name: 'direct', data: {}, opts: { jobId: 'd-0' } }])
      if (again[0]!.deduplicated) expect(again[0]!.id).toBe(acked[0])
      else acked.push(again[0]!.id)
    } finally {
      await queue.close()
    }
    for (const child of hosts) {
      const report = await waitFor(
        () => child.messages().find((m) => 'acked' in m),
        60_000,
        'a host to report its adds',
      )
      acked.push(...(report.acked as string[]))
    }
    expect(acked.length).toBeGreaterThanOrEqual(DIRECT_ADDS + 3 * HOST_ADDS)
    await waitAllCompleted(f)
    await expectEachCompletedOnce(f, acked)
    const byHost = await f.pool.query<{ host: string; n: number }>(
      `select host, count(*)::int as n from "${f.schema}".handled group by host order by host`,
    )
    expect(byHost.rows.map((r) => r.host)).toEqual(['h1', 'h2', 'h3'])
    // Their connections went through the proxies: the link was really shaped.
    for (const h of f.bed.hosts) expect(h.proxy.accepted).toBeGreaterThan(0)
    expectNoCrash(f)
    // docs/scaling.md quotes this: each host runs one Worker (concurrency 8) and one Queue adding.
    const peak = await connections()
    console.log(`netns fleet: peak ${peak.listeners} LISTEN + ${peak.others} other connections for 3 hosts`)
    expect(peak.listeners).toBeGreaterThanOrEqual(3)
    expect(await f.stopAll()).toEqual([0, 0, 0])
  })
})
