// A notification worker in its own process (spawned by demo.ts): each push is a row written through ctx.effect, in one commit with its ledger row and the job's completion.

import { Worker } from 'pgonce'
import { type HangNextSend, type PushData, QUEUE, type WorkerMessage, effectKey } from './demo-messages.js'

function env(name: string): string {
  const value = process.env[name]
  if (value === undefined || value === '') throw new Error(`demo-worker: ${name} is not set`)
  return value
}

const connectionString = env('DEMO_DATABASE_URL')
const schema = env('DEMO_SCHEMA')
const sendMs = Number(env('DEMO_SEND_MS'))
const leaseMs = Number(env('DEMO_LEASE_MS'))
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

function tell(message: WorkerMessage): void {
  if (process.connected) process.send?.(message)
}

// Set by demo.ts just before it kills this process: the next send stays open, so the kill lands inside it.
let hangNextSend = false
process.on('message', (message: HangNextSend) => {
  if (message.type === 'hang-next-send') hangNextSend = true
})

const worker = new Worker<PushData>(
  QUEUE,
  async (job, ctx) => {
    const { userId, commentId } = job.data
    // The stored result says whether this run sent the push or found it in the ledger.
    return ctx.effect(effectKey(userId, commentId), async (tx) => {
      await tx.query(
        `insert into "${schema}".sent_notifications (user_id, comment_id, job_id, worker_pid) values ($1, $2, $3, $4)`,
        [userId, commentId, job.id, process.pid],
      )
      if (hangNextSend) {
        hangNextSend = false
        tell({ type: 'sending', jobId: job.id, userId, commentId })
        // Heartbeats keep the lease while this hangs: only the kill ends it.
        await sleep(60_000)
      } else {
        await sleep(sendMs) // the push provider's latency
      }
    })
  },
  {
    connectionString,
    schema,
    concurrency: Number(env('DEMO_CONCURRENCY')),
    leaseMs,
    // Housekeeping (which rescues expired leases) runs often, so that a dead worker's jobs come back soon after its lease.
    maintenanceIntervalMs: 500,
    // A small prefetch: a killed worker strands what it holds until its lease expires.
    batchSize: 32,
    migrate: false,
  },
)
worker.on('error', (err) => tell({ type: 'error', message: err.message }))

let stopping = false
function stop(): void {
  if (stopping) return
  stopping = true
  void worker.close().finally(() => process.exit(0))
}
process.once('SIGTERM', stop)
// The demo went away (finished, crashed or killed): do not outlive it.
process.once('disconnect', stop)
// Ctrl-C reaches the whole process group: the demo decides how its workers stop.
process.on('SIGINT', () => {})

await worker.run()
tell({ type: 'ready' })
