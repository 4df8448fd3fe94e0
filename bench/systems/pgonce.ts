// pgonce under benchmark: Queue.add / addBulk / deduplication keys, and its Worker.

import { readFileSync } from 'node:fs'
import pg from 'pg'
import { Queue, Worker, migrate } from '../../src/index.js'
import { DEDUP_TTL_MS, bullStyleAdds } from './bull-style.js'
import { type BenchSystem, CONCURRENCY, type Consumer, type JobData, type SystemInfo } from './system.js'


function ownVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
  return pkg.version
}

async function open(url: string): Promise<BenchSystem> {
  const pool = new pg.Pool({ connectionString: url, max: CONCURRENCY })
  // pool.end() resolves once its clients are told to end, before their sockets close: the run's forced drop of the
  // database can still reach one, and an 'error' event without a listener would end the whole run.
  pool.on('error', () => {})
  await migrate({ pool })
  const queues = new Map<string, Queue<JobData>>()
  const queueFor = (name: string): Queue<JobData> => {
    let queue = queues.get(name)
    if (!queue) {
      queue = new Queue<JobData>(name, { pool, migrate: false })
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
      const worker = new Worker<JobData>(name, async (job) => onStart(job.data), { connectionString: url, concurrency: CONCURRENCY })
      worker.on('error', () => {})
      return { close: () => worker.close() }
    },
    async close() {
      for (const queue of queues.values()) await queue.close()
      await pool.end()
    },
  }
}

export const pgonce: SystemInfo = {
  id: 'pgonce',
  label: `pgonce ${ownVersion()}`,
  backend: 'postgres',
  config: [
    `one pg.Pool of ${CONCURRENCY} connections shared by every Queue; \`new Worker(queue, handler, { concurrency: ${CONCURRENCY} })\`, other options (batch claims, completion batching) at their defaults`,
    `W5/W7: \`deduplication: { id: key, ttl: ${DEDUP_TTL_MS} }\``,
  ],
  open,
}
