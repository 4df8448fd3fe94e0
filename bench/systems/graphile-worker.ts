// graphile-worker under benchmark: its performance guide's batching preset for throughput, and its defaults (no local
// queue, no completion batching), which its docs suggest for low-throughput work, as the latency candidate.

import { Logger, makeWorkerUtils, run } from 'graphile-worker'
import { packageVersion } from './package-version.js'
import { type BenchSystem, CONCURRENCY, type Consumer, type JobData, type SystemInfo } from './system.js'

const LOCAL_QUEUE_SIZE = 500
const silent = new Logger(() => () => {})

/** The `preset.worker` part of each configuration. */
const PRESETS: Record<string, object> = {
  'local-queue': { localQueue: { size: LOCAL_QUEUE_SIZE }, completeJobBatchDelay: 0, failJobBatchDelay: 0 },
  'no-local-queue': {},
}

async function open(url: string, config: string): Promise<BenchSystem> {
  const preset = PRESETS[config]
  if (!preset) throw new Error(`graphile-worker: unknown configuration ${config}`)
  const utils = await makeWorkerUtils({ connectionString: url, maxPoolSize: CONCURRENCY, logger: silent })
  await utils.migrate()
  const count = (task: string): Promise<number> =>
    utils.withPgClient(async (client) => {
      const { rows } = await client.query<{ n: number }>(
        'select count(*)::int as n from graphile_worker.jobs where task_identifier = $1',
        [task],
      )
      return rows[0]?.n ?? 0
    })
  return {
    async prepare() {},
    async add(task, data) {
      await utils.addJob(task, data)
    },
    async addBulk(task, batch) {
      await utils.addJobs(batch.map((payload) => ({ identifier: task, payload })))
    },
    async addDeduplicated(task, key, data) {
      await utils.addJob(task, data, { jobKey: key, jobKeyMode: 'unsafe_dedupe' })
    },
    countJobs: count,
    // Completing a job deletes it: whatever is left is unfinished.
    countUnfinished: count,
    async consume(task, onStart): Promise<Consumer> {
      const runner = await run({
        connectionString: url,
        concurrency: CONCURRENCY,
        maxPoolSize: CONCURRENCY + 2,
        noHandleSignals: true,
        logger: silent,
        taskList: { [task]: async (payload) => onStart(payload as JobData) },
        preset: { worker: preset },
      })
      return { close: () => runner.stop() }
    },
    async close() {
      await utils.release()
    },
  }
}

export const graphileWorker: SystemInfo = {
  id: 'graphile-worker',
  label: `graphile-worker ${packageVersion('graphile-worker')}`,
  backend: 'postgres',
  common: [
    `makeWorkerUtils({ maxPoolSize: ${CONCURRENCY} }) for adds (addJob; addJobs for bulk); W5/W7 \`addJob(task, payload, { jobKey: key, jobKeyMode: 'unsafe_dedupe' })\``,
  ],
  configs: [
    {
      key: 'local-queue',
      purpose: 'throughput: the batching settings of its performance guide',
      lines: [
        `run({ concurrency: ${CONCURRENCY}, maxPoolSize: ${CONCURRENCY + 2}, preset: { worker: { localQueue: { size: ${LOCAL_QUEUE_SIZE} }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } } })`,
      ],
    },
    {
      key: 'no-local-queue',
      purpose:
        'latency: no local queue and no completion batching (its defaults; the local queue trades latency for throughput)',
      lines: [`run({ concurrency: ${CONCURRENCY}, maxPoolSize: ${CONCURRENCY + 2} })`],
      // The add side is the same code in both: only the consumer workloads can differ.
      workloads: ['W4', 'W6', 'W8'],
    },
  ],
  open,
}
