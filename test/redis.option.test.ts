// The redis option: checked before any I/O; a URL opens (and on close() quits) a client of pgonce's own, a client you pass is never closed; without the option ioredis is never imported, and a URL without ioredis installed says so.

import { spawn } from 'node:child_process'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, Queue, ValidationError, Worker } from '../src/index.js'
import { type PrivateRedis, redisAvailable, startPrivateRedis } from './helpers/redis-support.js'
import { waitFor } from './helpers/wait.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

const ok = await redisAvailable('redis.option.test.ts', { needsServerBinary: true })

/** A resolve hook that refuses 'ioredis', as if the optional peer dependency were not installed. */
const NO_IOREDIS =
  'data:text/javascript,' +
  encodeURIComponent(`import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(
  'export async function resolve(s, c, next) { if (s === "ioredis" || s.startsWith("ioredis/")) '
  + '{ const e = new Error("Cannot find package \\'ioredis\\'"); e.code = "ERR_MODULE_NOT_FOUND"; throw e } return next(s, c) }'));`)

describe.skipIf(!ok)('the redis option', () => {
  let db: TestSchema
  let redis: PrivateRedis

  beforeAll(async () => {
    db = await freshSchema('redis_option')
    redis = await startPrivateRedis()
  })
  afterAll(async () => {
    await redis?.stop()
    await db?.drop()
  })

  it('is checked before any I/O on Queue, Worker and Effects', () => {
    const base = { connectionString: db.url, schema: db.schema }
    for (const bad of [42, 'localhost:6379', 'http://x', {}, { get: () => {} }, null]) {
      for (const make of [
        () => new Queue('q', { ...base, redis: bad as never }),
        () => new Effects({ ...base, redis: bad as never }),
        () => new Worker('q', async () => {}, { ...base, autorun: false, redis: bad as never }),
      ]) {
        expect(make).toThrow(ValidationError)
        try {
          make()
        } catch (err) {
          expect(err).toMatchObject({ code: 'INVALID_TYPE', field: 'options.redis' })
        }
      }
    }
  })

  /** The connections the private Redis has, by whether pgonce opened them (its clients are named 'pgonce'). */
  async function pgonceClients(): Promise<number> {
    const list = (await redis.admin.client('LIST')) as string
    return list.split('\n').filter((l) => / name=pgonce /.test(` ${l} `)).length
  }

  it('a URL: pgonce opens its own client and quits it on close()', async () => {
    const queue = new Queue('url', { connectionString: db.url, schema: db.schema, redis: redis.url })
    const effects = new Effects({ connectionString: db.url, schema: db.schema, redis: redis.url })
    const worker = new Worker('url', async () => {}, { connectionString: db.url, schema: db.schema, redis: redis.url })
    await queue.add('push', {}, { deduplication: { id: 'u', ttl: 60_000 } })
    await effects.runOnce('u', () => {})
    await worker.run()
    await waitFor(async () => (await pgonceClients()) === 3, 5_000, 'three clients of pgonce')
    await Promise.all([queue.close(), effects.close(), worker.close()])
    await waitFor(async () => (await pgonceClients()) === 0, 5_000, 'their clients to be closed')
  })

  it('a client of yours is used as is and never closed', async () => {
    const client = new Redis(redis.url)
    client.on('error', () => {})
    const queue = new Queue('mine', { connectionString: db.url, schema: db.schema, redis: client })
    const effects = new Effects({ connectionString: db.url, schema: db.schema, redis: client })
    const worker = new Worker('mine', async () => {}, { connectionString: db.url, schema: db.schema, redis: client })
    await queue.add('push', {}, { deduplication: { id: 'm', ttl: 60_000 } })
    await effects.runOnce('m', () => {})
    await worker.run()
    await Promise.all([queue.close(), effects.close(), worker.close()])
    expect(client.status).toBe('ready')
    expect(await client.ping()).toBe('PONG')
    expect(await pgonceClients()).toBe(0)
    client.disconnect()
  })

  it('without it ioredis is never imported; with a URL and no ioredis installed, the first call says what is missing', async () => {
    const child = spawn(
      process.execPath,
      ['--import', NO_IOREDIS, '--import', 'tsx', 'test/helpers/children/redis-no-ioredis.ts'],
      {
        cwd: new URL('..', import.meta.url).pathname,
        env: { ...process.env, PGONCE_URL: db.url, PGONCE_SCHEMA: db.schema },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    )
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c.toString()))
    child.stderr.on('data', (c: Buffer) => (out += c.toString()))
    const code = await new Promise((resolve) => child.once('exit', resolve))
    expect(code, out).toBe(0)
    const report = JSON.parse(out.trim().split('\n').pop() as string) as Record<string, unknown>
    expect(report.dedup).toBe(true)
    expect(report.runOnce).toEqual(['ran', 'duplicate-done'])
    expect(report.error).toMatch(/optional peer dependency 'ioredis'.*npm install ioredis/)
  })
})
