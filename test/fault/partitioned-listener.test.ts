// A worker whose host vanishes without closing its sockets (powered off, cut off by the network): its LISTEN session
// stays open on the server until TCP gives up on it, and with it the idle slot that says "this worker sleeps" (one of
// the queue's four: while they are all held by gone sessions, live workers take none). The session sets server-side TCP
// keepalives (sql/listen-session.sql), so the server ends it within about half a minute instead of the kernel's default
// two hours, its slot goes with it, and the next adds run on a worker that is alive.
//
// The partition is real: iptables drops every packet of the worker's LISTEN connection, both ways (root only; skipped
// without iptables, or a failure naming the install command when REQUIRE_IPTABLES=1, as in CI).

import { spawnSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../../src/index.js'
import { exited, spawnFixture } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'
import { waitForState } from '../helpers/jobs.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

const IPTABLES_INSTALL_HINT = 'apt-get install -y iptables (and run the tests as root)'
const iptables = spawnSync('iptables', ['-w', '-L', 'OUTPUT', '-n'], { stdio: 'ignore' }).status === 0
const required = process.env.REQUIRE_IPTABLES === '1'

describe.runIf(!iptables && required)('iptables (required: REQUIRE_IPTABLES=1)', () => {
  it('is usable', () => {
    throw new Error(`iptables is not usable but REQUIRE_IPTABLES=1: ${IPTABLES_INSTALL_HINT}`)
  })
})

/** Every rule this test adds carries this comment, so that one left by a run killed midway can be found and removed. */
const TAG = 'pgonce-test-partition'

/** The iptables rules that drop both directions of the TCP connection between 127.0.0.1:`port` and the server. */
function dropRules(serverPort: number, clientPort: number): string[][] {
  const rule = (from: number, to: number) => [
    'OUTPUT',
    '-p',
    'tcp',
    '-s',
    '127.0.0.1',
    '-d',
    '127.0.0.1',
    '--sport',
    String(from),
    '--dport',
    String(to),
    '-m',
    'comment',
    '--comment',
    TAG,
    '-j',
    'DROP',
  ]
  return [rule(clientPort, serverPort), rule(serverPort, clientPort)]
}

function iptablesRun(action: '-A' | '-D', rule: string[]): void {
  const r = spawnSync('iptables', ['-w', action, ...rule], { encoding: 'utf8' })
  if (r.status !== 0 && action === '-A') throw new Error(`iptables ${action} ${rule.join(' ')}: ${r.stderr}`)
}

/** Removes the rules of earlier runs (a stale one would blackhole whichever later connection reused its port). */
function removeStaleRules(): void {
  const listed = spawnSync('iptables', ['-w', '-S', 'OUTPUT'], { encoding: 'utf8' }).stdout ?? ''
  for (const line of listed.split('\n').filter((l) => l.startsWith('-A OUTPUT ') && l.includes(TAG))) {
    spawnSync('iptables', ['-w', '-D', ...line.slice(3).split(' ')], { stdio: 'ignore' })
  }
}

describe.skipIf(!iptables)(
  `a partitioned worker${iptables ? '' : ` (skipped: iptables not usable; ${IPTABLES_INSTALL_HINT})`}`,
  () => {
    let db: TestSchema

    beforeAll(async () => {
      removeStaleRules()
      db = await freshSchema('fault_partitioned_listener')
    })
    afterAll(async () => {
      removeStaleRules()
      await db?.drop()
    })

    it('its LISTEN session ends on the server within ~30 s with its idle slot, and plain adds then run on a live worker', async () => {
      const url = new URL(db.url)
      if (url.hostname !== '127.0.0.1' && url.hostname !== 'localhost') return // the rules below name 127.0.0.1
      const serverPort = Number(url.port || 5432)
      await db.pool.query(
        `create table "${db.schema}".handled (job_id bigint not null, pid int not null, attempt int not null)`,
      )
      const queue = new Queue('partitioned', { connectionString: db.url, schema: db.schema, migrate: false })
      // The worker whose host goes away: a process of its own, stopped (SIGSTOP) once its LISTEN connection is cut, so
      // that it neither polls nor claims any more, as if powered off.
      const child = spawnFixture('worker-child.ts', {
        PGONCE_URL: db.url,
        PGONCE_SCHEMA: db.schema,
        QUEUE: 'partitioned',
        LEASE_MS: '600000',
        MAINTENANCE_MS: '0',
        POLL_MS: '60000',
      })
      let live: Worker | undefined
      const rules: string[][] = []
      try {
        // It sleeps: its LISTEN session holds an idle slot of the queue, and a plain add wakes it.
        const slotHolder = async () =>
          (
            await db.pool.query<{ pid: number; port: number }>(
              `select a.pid, a.client_port as port from pg_locks l join pg_stat_activity a on a.pid = l.pid
         where l.locktype = 'advisory' and l.granted and l.objsubid = 1
           and ((l.classid::bigint << 32) | l.objid::bigint) = "${db.schema}"._idle_slot_key('partitioned', 0)`,
            )
          ).rows[0]
        await waitFor(slotHolder, 60_000, 'the first worker to hold an idle slot')
        const probe = await queue.add('probe', {})
        await waitFor(
          async () =>
            (await db.pool.query(`select 1 from "${db.schema}".handled where job_id = $1`, [probe.id])).rowCount === 1,
          10_000,
          'the sleeping worker to run the probe',
        )
        const { pid, port } = await waitFor(slotHolder, 10_000, 'the first worker to sleep again')
        expect(port).toBeGreaterThan(0)
        for (const rule of dropRules(serverPort, port)) {
          iptablesRun('-A', rule)
          rules.push(rule)
        }
        child.kill('SIGSTOP')
        const cut = Date.now()

        // The server notices the silent peer by itself (keepalives unanswered), ends the session, and its slot goes.
        await waitFor(
          async () => (await db.pool.query('select 1 from pg_stat_activity where pid = $1', [pid])).rowCount === 0,
          60_000,
          'the server to end the partitioned LISTEN session',
        )
        expect(Date.now() - cut).toBeLessThan(45_000)

        // A live worker runs the next plain add.
        const ranBy: string[] = []
        live = new Worker(
          'partitioned',
          async (job) => {
            ranBy.push(job.id)
          },
          { connectionString: db.url, schema: db.schema, migrate: false, pollIntervalMs: 200 },
        )
        await live.run()
        await waitFor(() => live?.listenerPid !== null, 10_000, "the live worker's LISTEN session")
        const job = await queue.add('after', {})
        const done = await waitForState(db, job.id, 'completed', 10_000)
        expect(done.attempts).toBe(1)
        expect(ranBy).toContain(job.id)
      } finally {
        for (const rule of rules) iptablesRun('-D', rule)
        child.kill('SIGKILL')
        await exited(child)
        await live?.close()
        await queue.close()
      }
    }, 120_000)
  },
)
