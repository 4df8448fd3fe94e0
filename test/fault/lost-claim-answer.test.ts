// Fault suite, a claim whose answer was lost: the claiming session is terminated (pg_terminate_backend) after its
// claim committed and before the answer reached the worker. A TCP proxy between the worker's pool and the server drops
// what the server sends on that one connection, from the moment the claim waits for a table lock the test holds.
// The worker chose the first half of the claim's lock tokens before it sent it: once it is connected again it gives
// back what that claim took, so the jobs run within seconds, not after their lease (60 s; housekeeping is off).

import { type Socket, connect, createServer } from 'node:net'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../../src/index.js'
import { type TestSchema, freshSchema, namedSessionUrl } from '../helpers/schema.js'
import { terminate } from '../helpers/clients.js'
import { waitFor } from '../helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('fault_lost_claim')
})
afterAll(async () => {
  await db?.drop()
})

/** A proxy to the test server; `mute(port)` drops everything the server sends on the connection it opened from `port`. */
async function proxyTo(url: string) {
  const target = new URL(url)
  const pairs: { client: Socket; server: Socket; muted: boolean }[] = []
  const proxy = createServer((client) => {
    const server = connect(Number(target.port || 5432), target.hostname)
    const pair = { client, server, muted: false }
    pairs.push(pair)
    client.pipe(server)
    server.on('data', (chunk: Buffer) => {
      if (!pair.muted) client.write(chunk)
    })
    const end = (): void => {
      client.destroy()
      server.destroy()
    }
    client.on('close', end).on('error', end)
    server.on('close', end).on('error', end)
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  const via = new URL(url)
  via.hostname = '127.0.0.1'
  via.port = String((proxy.address() as { port: number }).port)
  return {
    url: via.href,
    mute: (port: number): boolean => pairs.some((p) => p.server.localPort === port && (p.muted = true)),
    close: () =>
      new Promise<void>((resolve) => {
        for (const p of pairs) p.client.destroy()
        proxy.close(() => resolve())
      }),
  }
}

describe('a claim whose answer was lost', () => {
  it('gives its jobs back once the worker is connected again: they run at once, each once', async () => {
    const queue = new Queue('lost', { connectionString: db.url, schema: db.schema, migrate: false })
    const jobs = await queue.addBulk([
      { name: 'a', data: {} },
      { name: 'b', data: {} },
    ])
    const ids = jobs.map((j) => j.id)
    const proxy = await proxyTo(db.url)
    const locker = new pg.Client({ connectionString: db.url })
    await locker.connect()
    const runs: string[] = []
    let worker: Worker | undefined
    try {
      await locker.query('begin')
      await locker.query(`lock table "${db.schema}".jobs in exclusive mode`)
      worker = new Worker(
        'lost',
        async (job) => {
          runs.push(job.id)
        },
        {
          connectionString: namedSessionUrl(proxy.url, 'lost-claimer'),
          listenConnectionString: db.url,
          schema: db.schema,
          concurrency: 2,
          leaseMs: 60_000,
          pollIntervalMs: 200,
          maintenanceIntervalMs: 0,
          migrate: false,
        },
      )
      worker.on('error', () => {})
      const blocked = await waitFor(
        async () =>
          (
            await db.pool.query<{ pid: number; port: number }>(
              `select pid, client_port as port from pg_stat_activity where application_name = 'lost-claimer' and wait_event_type = 'Lock'`,
            )
          ).rows[0],
        30_000,
        'the claim to wait for the lock',
      )
      expect(proxy.mute(blocked.port)).toBe(true)
      await locker.query('commit')
      await waitFor(
        async () =>
          (
            await db.pool.query(
              `select count(*)::int as n from "${db.schema}".jobs where id = any($1) and state = 'active' and locked_by = $2`,
              [ids, worker?.id],
            )
          ).rows[0].n === 2,
        10_000,
        'the claim to commit',
      )
      expect(await terminate(db.pool, blocked.pid)).toBe(true)

      await waitFor(
        async () =>
          (
            await db.pool.query(
              `select count(*)::int as n from "${db.schema}".jobs where id = any($1) and state = 'completed'`,
              [ids],
            )
          ).rows[0].n === 2,
        15_000,
        'both jobs to run, long before their 60 s lease',
      )
      expect(runs.sort()).toEqual([...ids].sort())
      const { rows } = await db.pool.query(`select attempts from "${db.schema}".jobs where id = any($1)`, [ids])
      expect(rows).toEqual([{ attempts: 1 }, { attempts: 1 }])
    } finally {
      await locker.query('rollback').catch(() => {})
      await locker.end()
      await worker?.close()
      await proxy.close()
      await queue.close()
    }
  }, 60_000)
})
