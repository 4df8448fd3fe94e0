// pg-boss under benchmark: 16 local workers fetching 32 jobs at a time, LISTEN/NOTIFY wake-ups, an exclusive queue for dedup.

import { PgBoss } from 'pg-boss'
import { packageVersion } from './package-version.js'
import { type BenchSystem, CONCURRENCY, type Consumer, type JobData, type SystemInfo } from './system.js'

const BATCH_SIZE = 32
const POOL_SIZE = CONCURRENCY + 4

async function open(url: string): Promise<BenchSystem> {
  const boss = new PgBoss({ connectionString: url, max: POOL_SIZE, useListenNotify: true })
  boss.on('error', () => {})
  await boss.start()
  const count = async (queue: string, states: string[] | null): Promise<number> => {
    const { rows } = await boss.getDb().executeSql(
      'select count(*)::int as n from pgboss.job where name = $1 and ($2::text[] is null or state::text = any($2))',
      [queue, states])
    return (rows[0] as { n: number } | undefined)?.n ?? 0
  }
  return {
    async prepare(queue, setup) {
      await boss.createQueue(queue, { policy: setup?.dedup ? 'exclusive' : 'standard', notify: true })
    },
    async add(queue, data) {
      await boss.send(queue, data)
    },
    async addBulk(queue, batch) {
      await boss.insert(queue, batch.map((data) => ({ data })))
    },
    async addDeduplicated(queue, key, data) {
      await boss.send(queue, data, { singletonKey: key })
    },
    countJobs: (queue) => count(queue, null),
    countUnfinished: (queue) => count(queue, ['created', 'retry', 'active']),
    async consume(queue, onStart): Promise<Consumer> {
      const workId = await boss.work<JobData>(
        queue,
        { localConcurrency: CONCURRENCY, batchSize: BATCH_SIZE, burstWhenBatchFull: true },
        async (jobs) => {
          for (const job of jobs) onStart(job.data)
        },
      )
      return { close: () => boss.offWork(queue, { id: workId, wait: true }) }
    },
    async close() {
      await boss.stop({ graceful: true })
    },
  }
}

export const pgBoss: SystemInfo = {
  id: 'pg-boss',
  label: `pg-boss ${packageVersion('pg-boss')}`,
  backend: 'postgres',
  config: [
    `new PgBoss({ max: ${POOL_SIZE}, useListenNotify: true }); queues created with \`notify: true\` (wake workers on insert)`,
    `work(queue, { localConcurrency: ${CONCURRENCY}, batchSize: ${BATCH_SIZE}, burstWhenBatchFull: true }): ${CONCURRENCY} local workers fetching ${BATCH_SIZE} at a time, re-fetching at once while batches come back full`,
    "W5/W7: a queue with `policy: 'exclusive'` and `send(queue, data, { singletonKey: key })`",
  ],
  open,
}
