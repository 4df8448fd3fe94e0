// The Redis layer's epoch listener is a LISTEN session like a Worker's notifier, and gets the same server-side TCP
// keepalives (sql/listen-session.sql): a peer that vanished without closing its socket loses the session, and with it
// the listener slot, within about half a minute. Read off the server's socket with `ss`: its keepalive timer counts
// down from at most 10 s, where an ordinary connection's counts down from the server's setting (the kernel's two
// hours by default). test/fault/partitioned-listener.test.ts shows what the keepalives do for a Worker's session.

import { execFileSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../../src/index.js'
import { REDIS_URL, redisAvailable } from '../helpers/redis-support.js'
import { waitFor } from '../helpers/wait.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

const ok = await redisAvailable('redis.listen-keepalive.test.ts')
const hasSs = (() => {
  try {
    execFileSync('ss', ['-V'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()

/**
 * Seconds left on the keepalive timer of the server's socket to client port `port`, once the socket is idle (while
 * data is unacknowledged its timer is the retransmit one); null if no such socket shows a keepalive timer within 3 s.
 */
async function idleKeepaliveS(serverPort: number, port: number): Promise<number | null> {
  for (const deadline = Date.now() + 3_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
    const s = keepaliveTimerS(serverPort, port)
    if (s !== null) return s
  }
  return null
}

function keepaliveTimerS(serverPort: number, port: number): number | null {
  const out = execFileSync('ss', ['-tnoH', 'state', 'established', `( sport = :${serverPort} and dport = :${port} )`], {
    encoding: 'utf8',
  })
  // ss prints the time left as e.g. 9.871sec, 870ms, 119min or 1min59sec.
  const m = /timer:\(keepalive,(?:(\d+)min)?(?:([\d.]+)(ms|sec))?,/.exec(out)
  if (m === null) return null
  return Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0) / (m[3] === 'ms' ? 1000 : 1)
}

describe.skipIf(!ok || !hasSs)('the epoch listener session', () => {
  let db: TestSchema
  let queue: Queue<Record<string, never>>

  beforeAll(async () => {
    db = await freshSchema('redis_keepalive')
    queue = new Queue('ka', { connectionString: db.url, schema: db.schema, redis: REDIS_URL })
  })
  afterAll(async () => {
    await queue?.close()
    await db?.drop()
  })

  it('sets server-side TCP keepalives of at most 10 s idle, where an ordinary connection keeps the server default', async () => {
    const url = new URL(db.url)
    const local = ['127.0.0.1', 'localhost', '::1', '[::1]'].includes(url.hostname)
    await queue.add('a', {}, { deduplication: { id: 'k', ttl: 60_000 } })
    let port: number | null = null
    await waitFor(
      async () => {
        const { rows } = await db.pool.query<{ client_port: number | null }>(
          `select client_port from pg_stat_activity
         where application_name like 'pgonce-cache ' || $1 || ' %'`,
          [db.schema],
        )
        port = rows[0]?.client_port ?? null
        return rows.length > 0
      },
      5_000,
      'the epoch listener session',
    )
    // Over a Unix socket (no client port) keepalives do nothing; a server on another host has its sockets elsewhere.
    if (port === null || !local) return
    const serverPort = Number(url.port || 5432)
    const listener = await idleKeepaliveS(serverPort, port)
    expect(listener).not.toBeNull()
    expect(listener as number).toBeLessThanOrEqual(10.5)

    // The control: an ordinary connection of the same server, with the server's own keepalive setting.
    const client = await db.pool.connect()
    try {
      const {
        rows: [row],
      } = await client.query<{ port: number; idle: string }>(
        `select inet_client_port() as port, current_setting('tcp_keepalives_idle') as idle`,
      )
      const idle = Number(row!.idle)
      if (idle === 0 || idle > 10) expect((await idleKeepaliveS(serverPort, row!.port)) as number).toBeGreaterThan(10.5)
    } finally {
      client.release()
    }
  })
})
