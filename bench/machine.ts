// Describes the machine and servers a run measured, and whether Redis is up for the reference column.

import { cpus, hostname, totalmem } from 'node:os'
import { Redis } from 'ioredis'
import pg from 'pg'
import type { Machine } from './results.js'

/** Redis's version at `url`, or null when it does not answer within a second. */
export async function redisVersion(url: string): Promise<string | null> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  })
  redis.on('error', () => {})
  try {
    await redis.connect()
    const info = await redis.info('server')
    return /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown'
  } catch {
    return null
  } finally {
    redis.disconnect()
  }
}

async function postgresVersion(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ v: string }>("select 'PostgreSQL ' || current_setting('server_version') as v")
    return rows[0]?.v ?? 'PostgreSQL'
  } finally {
    await client.end()
  }
}

export async function describeMachine(
  postgresUrl: string,
  postgresKind: string,
  redis: string | null,
): Promise<Machine> {
  const cores = cpus()
  return {
    host: hostname(),
    cpus: cores.length,
    cpuModel: cores[0]?.model.trim() ?? 'unknown CPU',
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    postgres: await postgresVersion(postgresUrl),
    postgresKind,
    redis,
  }
}
