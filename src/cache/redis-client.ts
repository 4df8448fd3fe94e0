// The `redis` option: the caller's ioredis client (never closed by pgonce) or a URL (pgonce opens ioredis lazily and closes it).

import type { Logger } from '../logger.js'
import { fail } from '../validate.js'
import { FAILED, within } from './breaker.js'

/**
 * The part of an ioredis client pgonce uses, structurally (ioredis is an optional peer dependency: pgonce's types do
 * not import it). A `Redis` instance of ioredis 5 fits; so does anything with these methods.
 */
export interface RedisLike {
  mget(...keys: string[]): Promise<(string | null)[]>
  set(key: string, value: string): Promise<unknown>
  set(key: string, value: string, px: 'PX', ms: number): Promise<unknown>
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
  config(subcommand: 'GET', parameter: string): Promise<unknown>
}

/**
 * Turns on the Redis pre-check layer (docs/redis.md): an ioredis client of yours (pgonce never closes it; give it a
 * `commandTimeout` of a few tens of ms and `enableOfflineQueue: false` if you can, though pgonce bounds every command
 * itself), or a `redis://` URL (pgonce opens its own ioredis client with those settings and closes it on `close()`;
 * ioredis must then be installed). Postgres stays the only authority: every answer is what it would be without Redis.
 */
export type RedisOption = RedisLike | string

/** An ioredis client pgonce opened itself. */
interface OwnedRedis extends RedisLike {
  on(event: 'error', listener: (err: Error) => void): unknown
  once(event: 'ready', listener: () => void): unknown
  quit(): Promise<unknown>
  disconnect(): void
}

/** The bound pgonce puts on every command on the hot path. */
export const COMMAND_TIMEOUT_MS = 20
/** The commandTimeout of a client pgonce opens: a little above the bound, which decides first; this one cleans up. */
const CLIENT_COMMAND_TIMEOUT_MS = 30
const CONNECT_TIMEOUT_MS = 1_000

const METHODS = ['mget', 'set', 'eval', 'config'] as const

/** Checks the option before any I/O: a non-empty URL, or an object with ioredis's methods. */
export function checkRedisOption(value: unknown, field: string): RedisOption | undefined {
  if (value === undefined) return undefined
  if (typeof value === 'string') {
    if (!/^rediss?:\/\/./.test(value))
      fail('INVALID_TYPE', field, 'must be a redis:// or rediss:// URL, or an ioredis client')
    return value
  }
  if (
    typeof value !== 'object' ||
    value === null ||
    METHODS.some((m) => typeof (value as Record<string, unknown>)[m] !== 'function')
  ) {
    fail('INVALID_TYPE', field, `must be an ioredis client (${METHODS.join(', ')}) or a redis:// URL`)
  }
  return value as RedisLike
}

/** The client behind the option, and how to let it go: pgonce quits only a client it opened. */
export interface RedisHandle {
  client: RedisLike
  /** False until a client pgonce opened has connected for the first time (a caller's client: always true). */
  connected(): boolean
  /** Resolves when connected() becomes true. */
  ready: Promise<void>
  close(): Promise<void>
}

/** A caller's client as is; for a URL, imports ioredis (only now) and opens a client with bounded commands. */
export async function openRedis(option: RedisOption, logger: Logger): Promise<RedisHandle> {
  if (typeof option !== 'string')
    return { client: option, connected: () => true, ready: Promise.resolve(), close: async () => {} }
  let Redis: new (url: string, options: Record<string, unknown>) => OwnedRedis
  try {
    const mod = await import('ioredis')
    Redis = mod.Redis ?? mod.default
  } catch (err) {
    throw new Error(
      "pgonce: options.redis is a URL, which needs the optional peer dependency 'ioredis' (npm install ioredis)",
      { cause: err },
    )
  }
  const client = new Redis(option, {
    connectionName: 'pgonce',
    commandTimeout: CLIENT_COMMAND_TIMEOUT_MS,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: CONNECT_TIMEOUT_MS,
    retryStrategy: (times: number) => Math.min(times * 200, 2_000),
  })
  // A client pgonce opened never crashes the process: its faults are logged, and every call falls back to Postgres.
  let lastWarn = 0
  client.on('error', (err) => {
    if (Date.now() - lastWarn < 10_000) return
    lastWarn = Date.now()
    logger.warn({ err: err.message }, 'pgonce: Redis connection error; the cache layer answers from Postgres meanwhile')
  })
  // Commands before the first connection would fail at once (no offline queue): until then the layer sends none.
  let connected = false
  const ready = new Promise<void>((resolve) =>
    client.once('ready', () => {
      connected = true
      resolve()
    }),
  )
  return {
    client,
    connected: () => connected,
    ready,
    close: async () => {
      await Promise.race([client.quit().catch(() => {}), new Promise((r) => setTimeout(r, 500))])
      client.disconnect()
    },
  }
}

const warnedClients = new WeakSet<object>()

/**
 * Warns once per client when Redis evicts any key under memory pressure (`allkeys-*`): harmless for correctness
 * (a lost entry is a miss), but the cache stops helping and the epoch keys it relies on may go. CONFIG may be refused
 * (managed Redis): then nothing is said.
 */
export async function warnIfEvicting(client: RedisLike, logger: Logger): Promise<void> {
  if (warnedClients.has(client)) return
  // Not through the breaker: a refused CONFIG says nothing about Redis's health.
  const answer = await within(client.config('GET', 'maxmemory-policy'), 500)
  if (answer === FAILED || !Array.isArray(answer)) return
  warnedClients.add(client)
  const policy = String(answer[1] ?? '')
  if (policy.startsWith('allkeys-')) {
    logger.warn(
      { policy },
      `pgonce: Redis maxmemory-policy is ${policy}: under memory pressure it evicts pgonce's entries and epoch keys ` +
        'like any other key (no wrong answer, but the cache stops helping); use noeviction or a volatile-* policy (docs/redis.md)',
    )
  }
}
