// pg-boss under benchmark: 16 local workers; LISTEN/NOTIFY wake-ups with batched fetches for throughput, the same with
// single-job fetches and its lowest polling interval for latency, and plain polling (no pg_notify on every insert).

import { PgBoss } from 'pg-boss'
import { packageVersion } from './package-version.js'
import { type BenchSystem, CONCURRENCY, type Consumer, type JobData, type SystemInfo } from './system.js'

const BATCH_SIZE = 32
const POOL_SIZE = CONCURRENCY + 4
/** pg-boss refuses anything below 0.5 s (its docs: "must be >=0.5"). */
const MIN_POLLING_SECONDS = 0.5

interface Setup {
  /** LISTEN/NOTIFY: the instance listens, and queues are created with `notify: true` (a pg_notify in every insert). */
  notify: boolean
  work: Record<string, number | boolean>
}

const SETUPS: Record<string, Setup> = {
  'notify-batch': {
    notify: true,
    work: { localConcurrency: CONCURRENCY, batchSize: BATCH_SIZE, burstWhenBatchFull: true },
  },
  'notify-single': {
    notify: true,
    work: {
      localConcurrency: CONCURRENCY,
      batchSize: 1,
      pollingIntervalSeconds: MIN_POLLING_SECONDS,
      notifyPollingIntervalSeconds: MIN_POLLING_SECONDS,
    },
  },
  polling: {
    notify: false,
    work: {
      localConcurrency: CONCURRENCY,
      batchSize: BATCH_SIZE,
      burstWhenBatchFull: true,
      pollingIntervalSeconds: MIN_POLLING_SECONDS,
    },
  },
}

async function open(url: string, config: string): Promise<BenchSystem> {
  const setup = SETUPS[config]
  if (!setup) throw new Error(`pg-boss: unknown configuration ${config}`)
  const boss = new PgBoss({ connectionString: url, max: POOL_SIZE, useListenNotify: setup.notify })
  boss.on('error', () => {})
  await boss.start()
  const count = async (queue: string, states: string[] | null): Promise<number> => {
    const { rows } = await boss
      .getDb()
      .executeSql(
        'select count(*)::int as n from pgboss.job where name = $1 and ($2::text[] is null or state::text = any($2))',
        [queue, states],
      )
    return (rows[0] as { n: number } | undefined)?.n ?? 0
  }
  return {
    async prepare(queue, queueSetup) {
      await boss.createQueue(queue, { policy: queueSetup?.dedup ? 'exclusive' : 'standard', notify: setup.notify })
    },
    async add(queue, data) {
      await boss.send(queue, data)
    },
    async addBulk(queue, batch) {
      await boss.insert(
        queue,
        batch.map((data) => ({ data })),
      )
    },
    async addDeduplicated(queue, key, data) {
      await boss.send(queue, data, { singletonKey: key })
    },
    countJobs: (queue) => count(queue, null),
    countUnfinished: (queue) => count(queue, ['created', 'retry', 'active']),
    async consume(queue, onStart): Promise<Consumer> {
      const workId = await boss.work<JobData>(queue, setup.work, async (jobs) => {
        for (const job of jobs) onStart(job.data)
      })
      return { close: () => boss.offWork(queue, { id: workId, wait: true }) }
    },
    async close() {
      await boss.stop({ graceful: true })
    },
  }
}

const workCall = (config: string): string =>
  `work(queue, ${JSON.stringify(SETUPS[config]?.work)
    .replace(/"(\w+)":/g, '$1: ')
    .replace(/,/g, ', ')}, handler)`

export const pgBoss: SystemInfo = {
  id: 'pg-boss',
  label: `pg-boss ${packageVersion('pg-boss')}`,
  backend: 'postgres',
  common: [
    `new PgBoss({ max: ${POOL_SIZE} }); W5/W7 a queue with \`policy: 'exclusive'\` and \`send(queue, data, { singletonKey: key })\``,
  ],
  configs: [
    {
      key: 'notify-batch',
      purpose: 'throughput with wake-ups: batched fetches, fetching again at once while batches come back full',
      lines: ['`useListenNotify: true`, queues created with `notify: true`', workCall('notify-batch')],
    },
    {
      key: 'notify-single',
      purpose: `latency: wake-ups, one job per fetch, its lowest polling interval (${MIN_POLLING_SECONDS} s) as the backstop`,
      lines: ['`useListenNotify: true`, queues created with `notify: true`', workCall('notify-single')],
      // One job per fetch is a latency setting only.
      workloads: ['W6'],
    },
    {
      key: 'polling',
      purpose: `no LISTEN/NOTIFY (inserts without a pg_notify), its lowest polling interval (${MIN_POLLING_SECONDS} s)`,
      lines: ['`useListenNotify: false`, queues created with `notify: false`', workCall('polling')],
    },
  ],
  open,
}
