// BullMQ under benchmark, on its PostgreSQL backend and, as a reference, on Redis.

import { type ConnectionOptions, Queue, Worker, createPostgresBackend, runMigrations } from 'bullmq'
import pg from 'pg'
import { type BullStyleQueue, DEDUP_TTL_MS, bullStyleAdds } from './bull-style.js'
import { packageVersion } from './package-version.js'
import { type BenchSystem, CONCURRENCY, type Consumer, type JobData, type SystemInfo } from './system.js'

const UNFINISHED = ['waiting', 'active', 'delayed', 'prioritized', 'paused', 'waiting-children'] as const

/** The part of BullMQ's Queue used here, the same on both backends. */
interface QueueLike extends BullStyleQueue {
  waitUntilReady(): Promise<unknown>
  getJobCounts(): Promise<Record<string, number>>
  obliterate(opts: { force: boolean }): Promise<void>
  close(): Promise<void>
}

interface WorkerLike {
  on(event: 'error', listener: (err: Error) => void): unknown
  waitUntilReady(): Promise<unknown>
  close(): Promise<void>
}

type Processor = (job: { data: JobData }) => Promise<void>

/** What differs between the two backends: how a Queue and a Worker are made, and cleanup. */
interface Backend {
  queue(name: string, poolSize: number): QueueLike
  worker(name: string, processor: Processor): WorkerLike
  cleanup(queue: QueueLike): Promise<void>
}

function openWith(backend: Backend): BenchSystem {
  const queues = new Map<string, QueueLike>()
  const queueFor = (name: string): QueueLike => {
    let queue = queues.get(name)
    if (!queue) {
      queue = backend.queue(name, CONCURRENCY)
      queues.set(name, queue)
    }
    return queue
  }
  const counts = async (name: string): Promise<Record<string, number>> => queueFor(name).getJobCounts()
  return {
    async prepare(name) {
      await queueFor(name).waitUntilReady()
    },
    ...bullStyleAdds(queueFor),
    async countJobs(name) {
      return Object.values(await counts(name)).reduce((a, b) => a + b, 0)
    },
    async countUnfinished(name) {
      const c = await counts(name)
      return UNFINISHED.reduce((sum, state) => sum + (c[state] ?? 0), 0)
    },
    async consume(name, onStart): Promise<Consumer> {
      const worker = backend.worker(name, async (job) => onStart(job.data))
      worker.on('error', () => {})
      await worker.waitUntilReady()
      return { close: () => worker.close() }
    },
    async close() {
      for (const queue of queues.values()) {
        await backend.cleanup(queue)
        await queue.close()
      }
    },
  }
}

async function openPostgres(url: string): Promise<BenchSystem> {
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  try {
    await runMigrations(admin)
  } finally {
    await admin.end()
  }
  return openWith({
    queue: (name, poolSize) =>
      new Queue(name, { connection: { connectionString: url, max: poolSize } }, createPostgresBackend),
    worker: (name, processor) =>
      new Worker(
        name,
        processor,
        {
          connection: { connectionString: url, max: CONCURRENCY + 2 },
          concurrency: CONCURRENCY,
        },
        createPostgresBackend,
      ),
    cleanup: async () => {},
  })
}

function redisConnection(url: string): ConnectionOptions {
  const u = new URL(url)
  const db = Number(u.pathname.replace(/^\//, '') || '0')
  return { host: u.hostname, port: Number(u.port || 6379), db, maxRetriesPerRequest: null }
}

/** `url` may carry `?prefix=`: the key prefix of this run, shared by the W4/W8 child process. */
async function openRedis(url: string): Promise<BenchSystem> {
  const connection = redisConnection(url)
  const prefix = new URL(url).searchParams.get('prefix') ?? 'pgonce-bench'
  return openWith({
    queue: (name) => new Queue(name, { connection, prefix }),
    worker: (name, processor) =>
      new Worker(name, processor, {
        connection,
        prefix,
        concurrency: CONCURRENCY,
      }),
    cleanup: (queue) => queue.obliterate({ force: true }),
  })
}

const version = packageVersion('bullmq')
const dedup = `W5/W7: \`add(name, data, { deduplication: { id: key, ttl: ${DEDUP_TTL_MS} } })\``
/** One configuration: its documented Worker with our concurrency (its wake-ups are LISTEN/NOTIFY or blocking reads either way). */
const documented = [
  {
    key: 'documented',
    purpose: 'as documented',
    lines: [`Worker({ concurrency: ${CONCURRENCY} }), completed jobs kept`],
  },
]

export const bullmqPostgres: SystemInfo = {
  id: 'bullmq-postgres',
  label: `BullMQ ${version} (PostgreSQL)`,
  backend: 'postgres',
  common: [
    `its official PostgreSQL backend (\`createPostgresBackend\`), schema migrated with \`runMigrations\`; each Queue a pg pool of max ${CONCURRENCY}, the Worker ${CONCURRENCY + 2}`,
    dedup,
    'no `removeOnComplete`: with `{ count: 1000 }` (its PostgreSQL guide suggests retention for table size) this backend drained 2.6× slower in earlier runs',
  ],
  configs: documented,
  open: (url) => openPostgres(url),
}

export const bullmqRedis: SystemInfo = {
  id: 'bullmq-redis',
  label: `BullMQ ${version} (Redis, reference)`,
  backend: 'redis',
  common: ['Redis backend (ioredis), a key prefix of its own per run, obliterated at the end', dedup],
  configs: documented,
  open: (url) => openRedis(url),
}
