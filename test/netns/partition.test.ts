// A host cut off from the database while it runs jobs (its veth taken down on the bridge's side, every packet lost):
// by its own clock it knows when its leases run out, and aborts its handlers' ctx.signal (LeaseLostError) then, still
// cut off, within the lease of the cut (it reports that on stdout, which needs no network); its late effect, progress
// and completion are refused (LeaseLostError: the lease is lost, and the lease token would fence them anyway). Its jobs
// are rescued after their lease and run on the other hosts; when its cable is back, it goes on claiming without a
// restart. Then the same host cut while the database restarts: it comes back to a new server and runs jobs again,
// still the same process.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../../src/index.js'
import type { Child } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'
import { type Fleet, describeTitle, expectEachCompletedOnce, expectNoCrash, fleet, skipReason } from './support.js'

/** Short leases keep the test bounded: rescued 3 s after the last heartbeat, by housekeeping every 0.5 s. */
const LEASE_MS = 3_000
const HOST_ENV = { LEASE_MS: String(LEASE_MS), MAINTENANCE_MS: '500', STATEMENT_TIMEOUT_MS: '1500', POLL_MS: '300' }
/** How late after its lease's end (at most LEASE_MS after the cut) a cut-off host may abort, on a loaded machine. */
const ABORT_MARGIN_MS = 5_000
const HELD = 4

describe.skipIf(skipReason !== null)(describeTitle('a host partitioned from the database'), () => {
  let f: Fleet
  let queue: Queue
  let h1: Child

  beforeAll(async () => {
    f = await fleet(3, 'netns_partition')
    for (const h of f.bed.hosts) h.proxy.roundTrip(1)
    queue = new Queue(f.queue, { connectionString: f.bed.url, schema: f.schema, migrate: false })
  })
  afterAll(async () => {
    await queue?.close()
    await f?.close()
  })

  /**
   * Adds `n` plain jobs (jobIds `label-i`: an add retried after a connection the restart ended is answered by the job it
   * may have added) and waits until they are completed; returns who ran them.
   */
  async function runPlain(label: string, n: number): Promise<{ ids: string[]; hosts: string[] }> {
    const items = Array.from({ length: n }, (_, i) => ({ name: 'plain', data: {}, opts: { jobId: `${label}-${i}` } }))
    const ids = await waitFor(
      () =>
        queue.addBulk(items).then(
          (jobs) => jobs.map((j) => j.id),
          () => undefined,
        ),
      15_000,
      'an add to be acknowledged',
    )
    await waitFor(
      async () =>
        (
          await f.pool.query(`select 1 from "${f.schema}".jobs where id = any($1::bigint[]) and state <> 'completed'`, [
            ids,
          ])
        ).rowCount === 0,
      30_000,
      'the plain jobs to complete',
    )
    await expectEachCompletedOnce(f, ids)
    const hosts = await f.pool.query<{ host: string }>(
      `select distinct host from "${f.schema}".handled where job_id = any($1::bigint[])`,
      [ids],
    )
    return { ids, hosts: hosts.rows.map((r) => r.host) }
  }

  it("aborts its handlers at its leases' end while cut off, its jobs are rescued elsewhere, and it resumes after the heal without a restart", async () => {
    const [host1, host2, host3] = f.bed.hosts as [
      (typeof f.bed.hosts)[0],
      (typeof f.bed.hosts)[0],
      (typeof f.bed.hosts)[0],
    ]
    h1 = await f.start(host1, HOST_ENV)
    const held = (
      await queue.addBulk(Array.from({ length: HELD }, () => ({ name: 'held', data: { hold: true } })))
    ).map((j) => j.id)
    await waitFor(
      () => h1.messages().filter((m) => held.includes(m.started as string)).length === HELD,
      30_000,
      'h1 to run the held jobs',
    )
    f.bed.cut(host1)
    const cutAt = performance.now()
    // Still cut off, h1 aborts its handlers when their leases run out by its own clock, and says so on stdout.
    const abortedAt = await waitFor(
      () =>
        h1.messages().filter((m) => held.includes(m.aborted as string)).length === HELD ? performance.now() : undefined,
      LEASE_MS + ABORT_MARGIN_MS + 10_000,
      'h1, cut off, to abort its handlers at the end of their leases',
    )
    expect(abortedAt - cutAt).toBeLessThan(LEASE_MS + ABORT_MARGIN_MS)
    const aborted = h1.messages().filter((m) => held.includes(m.aborted as string))
    expect(aborted.map((m) => m.reason)).toEqual(Array(HELD).fill('LeaseLostError'))
    // Its late writes are refused at once, still cut off: the lease is lost.
    const late = await waitFor(
      () => {
        const reports = h1.messages().filter((m) => held.includes(m.late as string))
        return reports.length === HELD ? reports : undefined
      },
      10_000,
      'h1 to try its late writes',
    )
    for (const report of late)
      expect(report).toMatchObject({
        effect: 'LeaseLostError',
        progress: 'LeaseLostError',
        transaction: 'LeaseLostError',
      })
    await Promise.all([f.start(host2, HOST_ENV), f.start(host3, HOST_ENV)])
    // Rescued after the lease and run to completion by h2 and h3 while h1 is still cut off.
    await waitFor(
      async () =>
        (
          await f.pool.query(`select 1 from "${f.schema}".jobs where id = any($1::bigint[]) and state = 'completed'`, [
            held,
          ])
        ).rowCount === HELD,
      30_000,
      'the held jobs to be rescued and completed elsewhere',
    )
    const runs = await f.pool.query<{ host: string; attempt: number }>(
      `select host, attempt from "${f.schema}".handled where job_id = any($1::bigint[])`,
      [held],
    )
    expect(runs.rows.every((r) => r.host !== 'h1' && r.attempt === 2)).toBe(true)

    f.bed.heal(host1)
    // What the database holds is the rescuers' work alone: one run and one effect per job, their result, no late progress.
    await expectEachCompletedOnce(f, held)
    const rows = await f.pool.query<{ result: { host: string }; progress: unknown }>(
      `select result, progress from "${f.schema}".jobs where id = any($1::bigint[])`,
      [held],
    )
    for (const row of rows.rows) {
      expect(['h2', 'h3']).toContain(row.result.host)
      expect(row.progress).toBeNull()
    }

    // The same process goes on: with h2 and h3 gone, h1 alone runs the next jobs.
    const [c2, c3] = f.children.slice(1)
    c2!.kill('SIGTERM')
    c3!.kill('SIGTERM')
    await waitFor(() => c2!.exitCode !== null && c3!.exitCode !== null, 15_000, 'h2 and h3 to stop')
    expect((await runPlain('after-heal', 20)).hosts).toEqual(['h1'])
    expect(h1.exitCode).toBeNull()
    expectNoCrash(f)
  })

  it('comes back after the database restarted while it was cut off, and runs jobs again without a restart', async () => {
    const host1 = f.bed.hosts[0]!
    f.bed.cut(host1)
    f.bed.restartPostgres()
    f.bed.heal(host1)
    expect((await runPlain('after-restart', 20)).hosts).toEqual(['h1'])
    expect(h1.exitCode).toBeNull()
    expectNoCrash(f)
    h1.kill('SIGTERM')
    await waitFor(() => h1.exitCode !== null, 15_000, 'h1 to stop')
    expect(h1.exitCode).toBe(0)
  })
})
