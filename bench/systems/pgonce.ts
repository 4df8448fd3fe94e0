// pgonce under benchmark: Queue.add / addBulk / deduplication keys, and its Worker — through the public API only
// (Queue, Worker, migrate), loaded from the working tree or, for BENCH_BASELINE, from a checkout of another commit.

import { readFileSync } from 'node:fs'
import pg from 'pg'
import type * as PgonceApi from '../../src/index.js'
import { DEDUP_TTL_MS, bullStyleAdds } from './bull-style.js'
import { type BenchSystem, CONCURRENCY, type Consumer, type JobData, type SystemId, type SystemInfo } from './system.js'

type Api = Pick<typeof PgonceApi, 'Queue' | 'Worker' | 'migrate'>

/** The schema every pgonce variant migrates (each in a database of its own); the limit probes use the same. */
export const PGONCE_SCHEMA = 'pgonce'

function packageVersionAt(root: URL): string {
  const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { version: string }
  return pkg.version
}

/**
 * The batch cap of the `large-batches` configuration: the Worker's `batchSize`, which caps each claim and each
 * completion statement. 2,000 drained 100,000 no-op jobs 1.12–1.34× faster than the default in alternated rounds, 4,000
 * no faster than 2,000 (bench/DECISIONS.md, "Claims of up to batchSize").
 */
export const LARGE_BATCH_SIZE = 2_000

/** W4B's batch handler: batches of this many jobs (a guard on batch handlers' drain, not a tuned figure). */
export const HANDLER_BATCH_SIZE = 100

/**
 * The `limits-not-binding` configuration's queue limits (docs/flow-control.md): set, but never reached by one worker of
 * concurrency 16, so that W4 shows what a limited claim costs where no limit holds a job back.
 */
export const NON_BINDING_LIMITS = { concurrency: 1_000, rateLimit: { max: 10_000, durationMs: 1 } }

type WorkerSettings = { batchSize?: number; batch?: { size: number }; limits?: typeof NON_BINDING_LIMITS }

/** The Worker options each configuration sets beside `concurrency` (the one place a configuration's settings live). */
const WORKER_OPTIONS: Readonly<Record<string, WorkerSettings>> = {
  default: {},
  'large-batches': { batchSize: LARGE_BATCH_SIZE },
  'batch-handler': { batch: { size: HANDLER_BATCH_SIZE } },
  'limits-not-binding': { limits: NON_BINDING_LIMITS },
}

function workerOptionsOf(config: string): WorkerSettings {
  const options = WORKER_OPTIONS[config]
  if (!options) throw new Error(`pgonce has no bench configuration '${config}'`)
  return options
}

async function openWith(api: Api, url: string, config: string): Promise<BenchSystem> {
  const { Queue, Worker, migrate } = api
  const workerOptions = workerOptionsOf(config)
  const pool = new pg.Pool({ connectionString: url, max: CONCURRENCY })
  // pool.end() resolves once its clients are told to end, before their sockets close: the run's forced drop of the
  // database can still reach one, and an 'error' event without a listener would end the whole run.
  pool.on('error', () => {})
  await migrate({ pool, schema: PGONCE_SCHEMA })
  const queues = new Map<string, InstanceType<Api['Queue']>>()
  const queueFor = (name: string): InstanceType<Api['Queue']> => {
    let queue = queues.get(name)
    if (!queue) {
      queue = new Queue<JobData>(name, { pool, schema: PGONCE_SCHEMA, migrate: false })
      queues.set(name, queue)
    }
    return queue
  }
  const count = async (name: string, unfinishedOnly: boolean): Promise<number> => {
    const counts = await queueFor(name).getJobCounts()
    const unfinished = counts.waiting + counts.delayed + counts['waiting-children'] + counts.active
    return unfinishedOnly ? unfinished : unfinished + counts.completed + counts.failed
  }
  return {
    async prepare(name) {
      await queueFor(name).getJobCounts()
    },
    ...bullStyleAdds(queueFor),
    countJobs: (name) => count(name, false),
    countUnfinished: (name) => count(name, true),
    async consume(name, onStart): Promise<Consumer> {
      const common = { connectionString: url, schema: PGONCE_SCHEMA, concurrency: CONCURRENCY }
      const { batch, limits, ...rest } = workerOptions
      if (limits !== undefined) {
        const queue = queueFor(name) as { setLimits?: (l: typeof NON_BINDING_LIMITS) => Promise<void> }
        if (queue.setLimits === undefined) throw new Error('this pgonce has no queue.setLimits')
        await queue.setLimits(limits)
      }
      const worker =
        batch === undefined
          ? new Worker<JobData>(name, async (job) => onStart(job.data), { ...common, ...rest })
          : new Worker<JobData>(
              name,
              async (jobs) => {
                for (const job of jobs) onStart(job.data)
              },
              { ...common, batch },
            )
      worker.on('error', () => {})
      return { close: () => worker.close() }
    },
    async close() {
      for (const queue of queues.values()) await queue.close()
      await pool.end()
    },
  }
}

const LIMITS_CONFIG: SystemInfo['configs'][number] = {
  key: 'limits-not-binding',
  purpose:
    'the cost of flow control where it holds nothing back: W4 with queue limits set but never reached (docs/flow-control.md)',
  lines: [
    `\`queue.setLimits({ concurrency: ${NON_BINDING_LIMITS.concurrency}, rateLimit: { max: ${NON_BINDING_LIMITS.rateLimit.max}, durationMs: ${NON_BINDING_LIMITS.rateLimit.durationMs} } })\`, then the default Worker`,
  ],
  workloads: ['W4'],
}

/**
 * pgonce from the source tree at `root` (a directory URL ending in `/`): the working tree, or a baseline checkout.
 * Its `src/index.ts` is imported through tsx, so that checkout needs its own node_modules (or a link to ours).
 */
export function pgonceSystem(id: SystemId, label: (version: string) => string, root: URL): SystemInfo {
  let api: Promise<Api> | null = null
  const load = (): Promise<Api> => {
    api ??= import(new URL('src/index.ts', root).href) as Promise<Api>
    return api
  }
  return {
    id,
    label: label(packageVersionAt(root)),
    backend: 'postgres',
    common: [
      `one pg.Pool of ${CONCURRENCY} connections shared by every Queue; \`deduplication: { id: key, ttl: ${DEDUP_TTL_MS} }\` for W5/W7`,
    ],
    configs: [
      {
        key: 'default',
        purpose: 'its defaults',
        lines: [
          `\`new Worker(queue, handler, { concurrency: ${CONCURRENCY} })\`, every other option (batch claims, completion batching) at its default`,
        ],
      },
      {
        key: 'large-batches',
        purpose:
          'throughput on a backlog of fast jobs: larger claims and completions (docs/performance.md, `batchSize`)',
        lines: [`\`new Worker(queue, handler, { concurrency: ${CONCURRENCY}, batchSize: ${LARGE_BATCH_SIZE} })\``],
        // The add side is the same code in both: only the consumer workloads can differ.
        workloads: ['W4', 'W8'],
      },
      {
        key: 'batch-handler',
        purpose: "W4's backlog drained by a batch handler (docs/workers.md, `batch`): a guard, not a comparison",
        lines: [
          `\`new Worker(queue, async (jobs) => …, { concurrency: ${CONCURRENCY}, batch: { size: ${HANDLER_BATCH_SIZE} } })\``,
        ],
        workloads: ['W4B'],
      },
      // A baseline from before flow control has no queue.setLimits.
      ...(id === 'pgonce' ? [LIMITS_CONFIG] : []),
    ],
    open: async (url, config) => openWith(await load(), url, config),
  }
}

export const pgonce: SystemInfo = pgonceSystem('pgonce', (v) => `pgonce ${v}`, new URL('../../', import.meta.url))
