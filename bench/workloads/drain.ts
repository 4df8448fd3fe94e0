// W4, W4B and W8: processing throughput of a queued backlog, measured in a child process (which also gives the worker's
// RSS).

import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { DrainReport, DrainTask } from '../drain-child.js'
import { perSecond } from '../measure.js'
import { type DrainContext, type WorkloadResult, enqueueBacklog, maintain } from './context.js'

const CHILD = fileURLToPath(new URL('../drain-child.ts', import.meta.url))
/** The repository root, where `--import tsx` resolves. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const DEADLINE_MS = 300_000
const MB = 1024 * 1024

type ChildMessage = { ok: true; report: DrainReport } | { ok: false; error: string }

function runChild(task: DrainTask): Promise<DrainReport> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
      cwd: ROOT,
      env: { ...process.env, BENCH_DRAIN: JSON.stringify(task) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    let answer: ChildMessage | null = null
    const timer = setTimeout(() => child.kill('SIGKILL'), task.deadlineMs + 60_000)
    child.on('message', (message) => {
      answer = message as ChildMessage
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      const got = answer
      if (got?.ok) resolve(got.report)
      else reject(new Error(got ? got.error : `drain child exited with ${signal ?? code} and no report`))
    })
  })
}

function fromReport(report: DrainReport, ops: number): Omit<WorkloadResult, 'correct'> {
  return {
    ops,
    ms: report.ms,
    perSecond: perSecond(ops, report.ms),
    ...(report.roundTrips !== null ? { roundTripsPerOp: report.roundTrips / ops } : {}),
    ...(report.walBytes !== null ? { walBytesPerOp: report.walBytes / ops } : {}),
    peakRssMb: report.peakRssBytes / MB,
    startRssMb: report.startRssBytes / MB,
  }
}

/**
 * W4 (queue `w4`) and W4B (`w4b`, run by configurations with a batch consumer): a backlog of no-op jobs drained with
 * concurrency 16, until every completion is stored.
 */
export const drainBacklog =
  (queue: 'w4' | 'w4b') =>
  async (ctx: DrainContext): Promise<WorkloadResult> => {
    const n = ctx.sizes.w4Jobs
    await ctx.system.prepare(queue)
    await enqueueBacklog(ctx, queue, n)
    await maintain(ctx.admin, ctx.mode)
    const report = await runChild({
      system: ctx.info.id,
      config: ctx.config,
      url: ctx.url,
      queue,
      target: n,
      waitForCompletion: true,
      deadlineMs: DEADLINE_MS,
    })
    const correct = report.handled === n
    return {
      ...fromReport(report, n),
      correct,
      ...(correct ? {} : { note: `${report.handled} handler runs for ${n} jobs` }),
    }
  }

/** W8: throughput over the head of a deep backlog (loaded untimed; vacuumed and analysed only in the `analysed` mode). */
export async function deepBacklog(ctx: DrainContext): Promise<WorkloadResult> {
  const { w8Queued: queued, w8Window: window } = ctx.sizes
  await ctx.system.prepare('w8')
  const loadMs = await enqueueBacklog(ctx, 'w8', queued, 4)
  await maintain(ctx.admin, ctx.mode)
  const report = await runChild({
    system: ctx.info.id,
    config: ctx.config,
    url: ctx.url,
    queue: 'w8',
    target: window,
    waitForCompletion: false,
    deadlineMs: DEADLINE_MS,
  })
  return {
    ...fromReport(report, window),
    correct: report.handled >= window,
    note: `first ${window.toLocaleString('en-US')} of ${queued.toLocaleString('en-US')} queued jobs; backlog loaded in ${(loadMs / 1000).toFixed(1)} s`,
  }
}

export const DRAINS = { W4: drainBacklog('w4'), W4B: drainBacklog('w4b'), W8: deepBacklog } as const
export type DrainId = keyof typeof DRAINS
export const isDrain = (id: string): id is DrainId => id in DRAINS
