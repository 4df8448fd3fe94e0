// Job schedulers (BullMQ's names): a job added on a fixed interval or a cron pattern, one per tick however many workers run.

import { Cron } from 'croner'
import { admitOne } from './admission/admit.js'
import { type JobOptions, toAddRequest } from './admission/request.js'
import type { Execute } from './db/executor.js'
import { sqlFor } from './db/sql-files.js'
import { ValidationError } from './errors.js'
import { MAX_DURATION_MS, checkInteger, checkOptions, checkText, fail, serializeData } from './validate.js'

/** When a scheduler ticks: every `every` ms, or on a cron `pattern` (5 to 7 fields, seconds first when 6 or 7). */
export type RepeatOptions =
  | { every: number }
  | {
      pattern: string
      /** IANA time zone the pattern is read in. (Default: UTC) */
      tz?: string
    }

/**
 * The job each tick adds. `opts` are add's options, without `jobId` (each tick's job gets `sched:<queue>:<id>:<tick ms>`:
 * jobIds are unique across queues, so two queues' schedulers of the same id never take each other's ticks) and
 * `dependsOn`.
 */
export interface SchedulerTemplate<Data> {
  name: string
  data?: Data
  opts?: Omit<JobOptions, 'jobId' | 'dependsOn'>
}

/** A stored scheduler. */
export interface JobScheduler<Data = unknown> {
  id: string
  queue: string
  every: number | null
  pattern: string | null
  tz: string | null
  template: { name: string; data: Data; opts: Omit<JobOptions, 'jobId' | 'dependsOn'> }
  /** The next tick, by the database clock. */
  nextRunAt: Date
  /** The last tick that added a job. */
  lastRunAt: Date | null
}

/** Longest scheduler id, in bytes: each tick's jobId (`sched:<queue>:<id>:<tick ms>`, at most 255 bytes) is built from it. */
const MAX_SCHEDULER_ID_BYTES = 100
const REPEAT_KEYS = ['every', 'pattern', 'tz'] as const
const TEMPLATE_KEYS = ['name', 'data', 'opts'] as const

/** The repeat rule, checked: croner parses the pattern and the time zone before any I/O. */
interface Rule {
  everyMs: number | null
  cron: Cron | null
  pattern: string | null
  tz: string | null
}

function toRule(repeat: unknown): Rule {
  const r = checkOptions<{ every: number; pattern: string; tz: string }>(repeat, 'repeat', REPEAT_KEYS)
  if ((r.every === undefined) === (r.pattern === undefined))
    fail('CONFLICTING_OPTIONS', 'repeat', 'give exactly one of every and pattern')
  if (r.every !== undefined) {
    if (r.tz !== undefined) fail('CONFLICTING_OPTIONS', 'repeat.tz', 'goes with pattern, not every')
    return { everyMs: checkInteger(r.every, 'repeat.every', 1, MAX_DURATION_MS), cron: null, pattern: null, tz: null }
  }
  const pattern = checkText(r.pattern, 'repeat.pattern')
  const tz = r.tz === undefined ? null : checkText(r.tz, 'repeat.tz')
  return { everyMs: null, cron: cronOf(pattern, tz, 'repeat'), pattern, tz }
}

function cronOf(pattern: string, tz: string | null, field: string): Cron {
  let cron: Cron
  try {
    cron = new Cron(pattern, { paused: true, ...(tz === null ? { timezone: 'Etc/UTC' } : { timezone: tz }) })
    cron.nextRun(new Date())
  } catch (err) {
    const message = (err as Error).message
    return fail('INVALID_TYPE', /timezone/i.test(message) ? `${field}.tz` : `${field}.pattern`, message)
  }
  return cron
}

/**
 * The first tick after `nowMs`, on the rule's own grid (an `every` schedule keeps its phase): ticks missed while no
 * worker ran are not replayed, the schedule goes on from the next time to come.
 */
function nextTick(rule: Rule, lastTickMs: number, nowMs: number): number {
  if (rule.everyMs !== null) {
    const behind = Math.max(0, nowMs - lastTickMs)
    return lastTickMs + (Math.floor(behind / rule.everyMs) + 1) * rule.everyMs
  }
  const next = (rule.cron as Cron).nextRun(new Date(nowMs))
  if (next === null) return Number.MAX_SAFE_INTEGER
  return next.getTime()
}

async function dbNowMs(execute: Execute, schema: string): Promise<number> {
  const [row] = await execute<{ now_ms: number }>(sqlFor('db-now', schema), [])
  return Number((row as { now_ms: number }).now_ms)
}

/** Validates a scheduler (before any I/O) into what upsertScheduler stores. */
export function checkScheduler(id: unknown, repeat: unknown, template: unknown, maxDataBytes: number) {
  const schedulerId = checkText(id, 'id', MAX_SCHEDULER_ID_BYTES)
  const rule = toRule(repeat)
  const t = checkOptions<SchedulerTemplate<unknown>>(template, 'template', TEMPLATE_KEYS)
  const opts = (t.opts ?? {}) as JobOptions
  const refused = typeof opts === 'object' && opts !== null && ['jobId', 'dependsOn', 'runAt'].find((k) => k in opts)
  if (refused !== undefined && refused !== false) {
    fail(
      'UNKNOWN_OPTION',
      `template.opts.${refused}`,
      "a scheduler sets each tick's jobId and time, and takes no dependsOn",
    )
  }
  // Checked as an add would check it, so that a tick never meets a template it cannot add.
  const req = toAddRequest(t.name, t.data, opts, 'template', maxDataBytes)
  return {
    schedulerId,
    rule,
    name: req.name,
    dataJson: req.dataJson,
    optsJson: serializeData(opts, 'template.opts', 65_536),
  }
}

export async function upsertScheduler(
  execute: Execute,
  schema: string,
  queue: string,
  s: ReturnType<typeof checkScheduler>,
): Promise<void> {
  const nowMs = await dbNowMs(execute, schema)
  const first = s.rule.everyMs !== null ? nowMs + s.rule.everyMs : nextTick(s.rule, nowMs, nowMs)
  await execute(sqlFor('upsert-scheduler', schema), [
    queue,
    s.schedulerId,
    s.rule.everyMs,
    s.rule.pattern,
    s.rule.tz,
    s.name,
    s.dataJson,
    s.optsJson,
    first,
  ])
}

export async function removeScheduler(execute: Execute, schema: string, queue: string, id: string): Promise<boolean> {
  return (
    (await execute(sqlFor('remove-scheduler', schema), [queue, checkText(id, 'id', MAX_SCHEDULER_ID_BYTES)])).length > 0
  )
}

interface SchedulerRow {
  id: string
  queue: string
  every_ms: string | null
  pattern: string | null
  tz: string | null
  job_name: string
  job_data: unknown
  job_opts: Omit<JobOptions, 'jobId' | 'dependsOn'>
  next_run_at: Date
  last_run_at: Date | null
}

export async function listSchedulers<Data>(
  execute: Execute,
  schema: string,
  queue: string,
): Promise<JobScheduler<Data>[]> {
  const rows = await execute<SchedulerRow>(sqlFor('get-schedulers', schema), [queue])
  return rows.map((r) => ({
    id: r.id,
    queue: r.queue,
    every: r.every_ms === null ? null : Number(r.every_ms),
    pattern: r.pattern,
    tz: r.tz,
    template: { name: r.job_name, data: r.job_data as Data, opts: r.job_opts },
    nextRunAt: r.next_run_at,
    lastRunAt: r.last_run_at,
  }))
}

/**
 * Runs the ticks of `queue` that have come, inside the caller's transaction (`execute` on one connection, in BEGIN):
 * each due scheduler is locked (FOR UPDATE SKIP LOCKED, so another worker skips it), its job added through add_job()
 * with the jobId `sched:<queue>:<id>:<tick ms>`, and its next tick stored, all in that transaction: one job per tick however
 * many processes tick. A scheduler whose stored template no longer validates is reported and moved on.
 */
export async function runDueTicks(
  execute: Execute,
  schema: string,
  queue: string,
  maxDataBytes: number,
  report: (err: Error) => void,
): Promise<number> {
  type Due = SchedulerRow & { next_run_at_ms: number; now_ms: number }
  const due = await execute<Due>(sqlFor('due-schedulers', schema), [queue])
  let added = 0
  for (const s of due) {
    const tickMs = Number(s.next_run_at_ms)
    const nowMs = Number(s.now_ms)
    let rule: Rule
    try {
      rule =
        s.every_ms !== null
          ? { everyMs: Number(s.every_ms), cron: null, pattern: null, tz: null }
          : { everyMs: null, cron: cronOf(s.pattern as string, s.tz, 'pattern'), pattern: s.pattern, tz: s.tz }
    } catch (err) {
      // Edited by hand into something croner refuses: try again in a minute rather than at every turn.
      report(
        new Error(`pgonce: scheduler '${s.id}' of queue '${queue}' has an invalid pattern: ${(err as Error).message}`),
      )
      await execute(sqlFor('advance-scheduler', schema), [queue, s.id, tickMs, nowMs + 60_000])
      continue
    }
    try {
      const req = toAddRequest(
        s.job_name,
        s.job_data,
        { ...s.job_opts, jobId: `sched:${queue}:${s.id}:${tickMs}` },
        'template',
        maxDataBytes,
      )
      await admitOne({ execute, schema, queue }, req)
      added++
    } catch (err) {
      // A template that no longer validates skips this tick; a database error ends the transaction (nothing ticked).
      if (!(err instanceof ValidationError)) throw err
      report(new Error(`pgonce: scheduler '${s.id}' of queue '${queue}' skipped a tick: ${err.message}`))
    }
    await execute(sqlFor('advance-scheduler', schema), [queue, s.id, tickMs, nextTick(rule, tickMs, nowMs)])
  }
  return added
}

/** Ms until the next tick of any scheduler of `queue`, or null. */
export async function msToNextTick(execute: Execute, schema: string, queue: string): Promise<number | null> {
  const [row] = await execute<{ wait_ms: number | null }>(sqlFor('next-scheduler-tick', schema), [queue])
  return row?.wait_ms === null || row?.wait_ms === undefined ? null : Number(row.wait_ms)
}
