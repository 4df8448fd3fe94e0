// Real packet loss (5% each way, iptables inside each host's namespace; the kernel retransmits) between three hosts and
// the database while they add and run jobs: nothing acknowledged is lost, nothing runs twice, no host crashes.
// NETNS_LOSS_SECONDS sets how long (20 in the suite, to keep it within its budget; docs/scaling.md has a minute's run).

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { waitFor } from '../helpers/wait.js'
import {
  type Fleet,
  describeTitle,
  expectEachCompletedOnce,
  expectNoCrash,
  fleet,
  skipReason,
  waitAllCompleted,
} from './support.js'

const LOSS_SECONDS = Number(process.env.NETNS_LOSS_SECONDS ?? 20)
const HOST_ENV = {
  ADDS: '100000',
  ADD_SECONDS: String(LOSS_SECONDS),
  LEASE_MS: '5000',
  STATEMENT_TIMEOUT_MS: '2000',
  CONCURRENCY: '4',
}

describe.skipIf(skipReason !== null)(describeTitle('5% packet loss between three hosts and the database'), () => {
  let f: Fleet

  beforeAll(async () => {
    f = await fleet(3, 'netns_loss')
    for (const h of f.bed.hosts) h.proxy.roundTrip(1)
  })
  afterAll(async () => {
    await f?.close()
  })

  it(
    'loses no acknowledged add, runs nothing twice and crashes nothing',
    async () => {
      const hosts = await Promise.all(f.bed.hosts.map((h) => f.start(h, HOST_ENV)))
      for (const h of f.bed.hosts) f.bed.lose(h, 0.05)
      const acked: string[] = []
      try {
        for (const child of hosts) {
          const report = await waitFor(
            () => child.messages().find((m) => 'acked' in m),
            (LOSS_SECONDS + 30) * 1000,
            'a host to report its adds',
          )
          acked.push(...(report.acked as string[]))
        }
        // The loss was real: each host's namespace dropped packets.
        for (const h of f.bed.hosts) expect(f.bed.dropped(h)).toBeGreaterThan(0)
      } finally {
        for (const h of f.bed.hosts) f.bed.lose(h, 0)
      }
      expect(acked.length).toBeGreaterThan(0)
      console.log(`netns loss: ${LOSS_SECONDS} s at 5%, ${acked.length} adds acknowledged by the hosts`)
      await waitAllCompleted(f, 60_000)
      await expectEachCompletedOnce(f, acked)
      expectNoCrash(f)
      expect(await f.stopAll()).toEqual([0, 0, 0])
    },
    (LOSS_SECONDS + 120) * 1000,
  )
})
