// Micro-benchmark of the Redis pre-check layer: hot duplicate adds with and without Redis, beside BullMQ's own dedup on Redis; markdown tables.
// Run: npx tsx bench/redis-dedup.ts
//   env: DATABASE_URL, REDIS_URL (default the local ones), BENCH_N (sequential calls per latency row, default 3000),
//        BENCH_SECONDS (per throughput row, default 3), BENCH_PRODUCERS (default 16), BENCH_KEYS (key space, default 100)

import { randomBytes } from 'node:crypto'
import { cpus, loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { Queue as BullQueue } from 'bullmq'
import { Redis } from 'ioredis'
import pg from 'pg'
import { Queue, migrate } from '../src/index.js'
import { percentile } from './measure.js'

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const positive = (name: string, fallback: number): number => {
  const value = Number(process.env[name] ?? fallback)
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive whole number`)
  return value
}
const n = positive('BENCH_N', 3_000)
const seconds = positive('BENCH_SECONDS', 3)
const producers = positive('BENCH_PRODUCERS', 16)
const keySpace = positive('BENCH_KEYS', 100)
const TTL = 3_600_000
const schema = `bench_redis_${randomBytes(4).toString('hex')}`
const bullPrefix = `pgonce-bench-redis-${randomBytes(4).toString('hex')}`

/** One way of adding a duplicate of key `k`. */
type DuplicateAdd = (k: number) => Promise<unknown>

interface Latency {
  name: string
  p50: number
  p99: number
}
interface Throughput {
  name: string
  perSecond: number
  note: string
}

async function latency(name: string, add: DuplicateAdd): Promise<Latency> {
  for (let i = 0; i < 200; i++) await add(i % keySpace)
  const times = new Array<number>(n)
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await add(i % keySpace)
    times[i] = performance.now() - t0
  }
  return { name, p50: percentile(times, 50), p99: percentile(times, 99) }
}

async function throughput(name: string, add: DuplicateAdd, note: () => string): Promise<Throughput> {
  let done = 0
  const until = performance.now() + seconds * 1000
  const started = performance.now()
  await Promise.all(
    Array.from({ length: producers }, async (_, p) => {
      for (let i = p; performance.now() < until; i += producers) {
        await add(i % keySpace)
        done++
      }
    }),
  )
  return { name, perSecond: (done * 1000) / (performance.now() - started), note: note() }
}

const pool = new pg.Pool({ connectionString: url, max: 20 })
await migrate({ pool, schema })
const plain = new Queue<{ k: number }>('bench-pg', { pool, schema, migrate: false })
const cached = new Queue<{ k: number }>('bench-redis', { pool, schema, migrate: false, redis: redisUrl })
const bullConnection = new URL(redisUrl)
const bull = new BullQueue('bench-bull', {
  connection: { host: bullConnection.hostname, port: Number(bullConnection.port || 6379), maxRetriesPerRequest: null },
  prefix: bullPrefix,
})
const redis = new Redis(redisUrl)
const client = await pool.connect()

const pgonceAdd =
  (q: Queue<{ k: number }>): DuplicateAdd =>
  (k) =>
    q.add('push', { k }, { deduplication: { id: `key:${k}`, ttl: TTL } })
const bullAdd: DuplicateAdd = (k) => bull.add('push', { k }, { deduplication: { id: `key:${k}`, ttl: TTL } })
const hitRatio = (): string => {
  const c = cached.cacheOutcomes.snapshot()
  const asked = (c.hit ?? 0) + (c.miss ?? 0) + (c.fallback ?? 0) + (c['breaker-open'] ?? 0) + (c.unsynced ?? 0)
  return `${(((c.hit ?? 0) / Math.max(asked, 1)) * 100).toFixed(1)}% answered from Redis (${JSON.stringify(c)})`
}

const latencies: Latency[] = []
const rates: Throughput[] = []
try {
  // Every key held (the first adds), and the cache synced: a duplicate answered from Redis.
  for (let k = 0; k < keySpace; k++) {
    await pgonceAdd(plain)(k)
    await pgonceAdd(cached)(k)
    await bullAdd(k)
  }
  for (let i = 0; cached.cacheOutcomes.get('hit') === 0; i++) {
    if (i > 500) throw new Error('the Redis layer never answered a duplicate')
    await pgonceAdd(cached)(0)
    await new Promise((r) => setTimeout(r, 10))
  }

  latencies.push(await latency('reference: `select 1` round trip (pg)', () => client.query('select 1')))
  latencies.push(await latency('reference: `PING` round trip (ioredis)', () => redis.ping()))
  latencies.push(await latency('pgonce, no Redis: duplicate add (Postgres)', pgonceAdd(plain)))
  latencies.push(await latency('pgonce with Redis: duplicate add (pre-check)', pgonceAdd(cached)))
  latencies.push(await latency('BullMQ on Redis: duplicate add (deduplication.id)', bullAdd))

  rates.push(await throughput('pgonce, no Redis', pgonceAdd(plain), () => 'one add_job() per add, pool of 20'))
  rates.push(await throughput('pgonce with Redis', pgonceAdd(cached), hitRatio))
  rates.push(await throughput('BullMQ on Redis', bullAdd, () => 'one Lua script per add'))
} finally {
  client.release()
  await plain.close()
  await cached.close()
  await bull.obliterate({ force: true }).catch(() => {})
  await bull.close()
  for (let cursor = '0', first = true; first || cursor !== '0'; first = false) {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `pgonce:{${schema}*`, 'COUNT', 1000)
    cursor = next
    if (keys.length > 0) await redis.del(...keys)
  }
  redis.disconnect()
  await pool.query(`drop schema if exists "${schema}" cascade`)
  await pool.end()
}

const load = loadavg()
  .map((l) => l.toFixed(2))
  .join(' ')
console.log(
  `\nHot duplicate adds: ${keySpace} keys, each held with a 1 h TTL; PostgreSQL at ${new URL(url).host}, Redis at ` +
    `${new URL(redisUrl).host}; ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), load average ${load}\n`,
)
console.log(`Latency: ${n} sequential awaited calls per row\n`)
console.log(
  [
    '| operation | p50 ms | p99 ms |',
    '| --- | ---: | ---: |',
    ...latencies.map((r) => `| ${r.name} | ${r.p50.toFixed(3)} | ${r.p99.toFixed(3)} |`),
  ].join('\n'),
)
console.log(`\nThroughput: ${producers} producers for ${seconds} s each\n`)
const base = rates[0]?.perSecond ?? 1
console.log(
  [
    '| system | duplicates/s | vs pgonce without Redis | note |',
    '| --- | ---: | ---: | --- |',
    ...rates.map(
      (r) =>
        `| ${r.name} | ${Math.round(r.perSecond).toLocaleString('en-US')} | ${(r.perSecond / base).toFixed(2)}× | ${r.note} |`,
    ),
  ].join('\n'),
)
