// Child process of W4/W8: consumes one queue with one system, then reports time, round trips, WAL and RSS to its parent.

import pg from 'pg'
import { errorText, pollUntil, within } from './measure.js'
import { countRoundTrips } from './round-trips.js'
import { systemById } from './systems/registry.js'
import { walBytesSince, walPosition } from './workloads/context.js'

export interface DrainTask {
  system: string
  /** The configuration key the system is opened in. */
  config: string
  url: string
  queue: string
  /** Handler starts to wait for. */
  target: number
  /** W4: also wait until the system reports no unfinished job (completions stored). */
  waitForCompletion: boolean
  deadlineMs: number
}

export interface DrainReport {
  /** From the first handler start to the target (W8) or to the last completion stored (W4). */
  ms: number
  handled: number
  roundTrips: number | null
  walBytes: number | null
  startRssBytes: number
  peakRssBytes: number
}

async function drain(task: DrainTask): Promise<DrainReport> {
  const info = systemById(task.system)
  const roundTrips = countRoundTrips()
  const system = await info.open(task.url, task.config)
  await system.prepare(task.queue)
  const admin = info.backend === 'postgres' ? new pg.Client({ connectionString: task.url }) : null
  await admin?.connect()
  try {
    const wal = admin ? await walPosition(admin) : null
    const startRssBytes = process.memoryUsage.rss()
    let peakRssBytes = startRssBytes
    const sampler = setInterval(() => {
      peakRssBytes = Math.max(peakRssBytes, process.memoryUsage.rss())
    }, 10)
    let handled = 0
    let firstStart = 0
    let reachedTarget: () => void = () => {}
    const targetReached = new Promise<void>((resolve) => {
      reachedTarget = resolve
    })
    const sentBefore = roundTrips()
    const consumer = await system.consume(task.queue, () => {
      if (handled === 0) firstStart = performance.now()
      if (++handled === task.target) reachedTarget()
    })
    let end: number
    let polls = 0
    let sent: number
    try {
      await within(targetReached, task.deadlineMs, `${task.target} jobs to start`)
      end = performance.now()
      if (task.waitForCompletion) {
        await pollUntil(
          async () => {
            polls++
            return (await system.countUnfinished(task.queue)) === 0
          },
          task.deadlineMs,
          'every job to complete',
        )
        end = performance.now()
      }
      // Each poll above is one query of ours, not the consumer's.
      sent = roundTrips() - sentBefore - polls
      peakRssBytes = Math.max(peakRssBytes, process.memoryUsage.rss())
    } finally {
      clearInterval(sampler)
      await consumer.close()
    }
    const walBytes = admin && wal !== null ? await walBytesSince(admin, wal) : null
    return {
      ms: end - firstStart,
      handled,
      roundTrips: info.backend === 'postgres' ? sent : null,
      walBytes,
      startRssBytes,
      peakRssBytes,
    }
  } finally {
    await admin?.end()
    await system.close()
  }
}

const raw = process.env.BENCH_DRAIN
if (!raw || !process.send)
  throw new Error('drain-child runs as a child of bench/workloads/drain.ts (BENCH_DRAIN and an IPC channel)')
const send = process.send.bind(process)
const answer = await drain(JSON.parse(raw) as DrainTask).then(
  (report) => ({ ok: true, report }),
  (err: unknown) => ({ ok: false, error: errorText(err) }),
)
// Exit once the answer is out, even if a system left a timer or socket behind.
send(answer, () => process.exit(0))
