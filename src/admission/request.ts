// Validates the arguments of add/addBulk (docs/validation.md) into one request per job, before any I/O.

import type { Backoff } from '../job.js'
import {
  MAX_DURATION_MS,
  checkBoolean,
  checkInteger,
  checkJobIdRef,
  checkOptions,
  checkText,
  fail,
  isPlainObject,
  serializeData,
} from '../validate.js'
import { checkRunAt } from './run-at.js'
import { MAX_TIMER_MS } from '../db/connection.js'

/** Enqueue-side deduplication by key (docs/deduplication.md). */
export interface DeduplicationOptions {
  /** The key, per queue: name the effect, not the message (`notify:push:42:7`). */
  id: string
  /** How long the key is held, in ms, from the database clock. Without it the key is held while its job is live. */
  ttl?: number
  /** On a duplicate, keep the pending owner and restart its TTL (debounce). Needs `ttl`. (Default: false) */
  extend?: boolean
  /** On a duplicate, supersede the owner with this job's data; wins over `extend`. (Default: false) */
  replace?: boolean
}

/** The job's group (docs/flow-control.md#groups): the queue's group limits apply to each group id separately. */
export interface GroupOptions {
  /** The group's id, 1 to 128 characters (a tenant, a user, an upstream account). */
  id: string
}

/** Longest group id, in characters. */
export const MAX_GROUP_ID_LENGTH = 128

export interface JobOptions {
  /** Custom id: while a generation with it is live (in any queue), adding it again returns that job. */
  jobId?: string
  deduplication?: DeduplicationOptions
  /** Run no earlier than this many ms from now. (Default: 0) */
  delay?: number
  /** Run no earlier than this instant (by the database clock): a Date, an ISO-8601 string with an offset, or epoch ms. A past one is due now. Not with `delay`. */
  runAt?: Date | string | number
  /** Lower runs first; 0 is the highest. (Default: 0) */
  priority?: number
  /**
   * How long one run may take, in ms, by the database clock from its start: past it, `ctx.signal` aborts with
   * `JobTimeoutError`, the attempt fails, and the handler can no longer complete the job (docs/workers.md#timeouts).
   * (Default: the Worker's `timeoutMs`, else none)
   */
  timeoutMs?: number
  /** Runs in all, including the first. (Default: 1) */
  attempts?: number
  /** Delay between attempts: ms (fixed) or `{ type, delay, jitter }`. (Default: none, retry at once) */
  backoff?: number | Backoff
  /** Internal ids (`job.id`) of jobs that must complete before this one runs. */
  dependsOn?: string[]
  /** The job's group: group limits (`setLimits({ group })`) hold per group id, and groups are served fairly. */
  group?: GroupOptions
}

export const JOB_OPTION_KEYS = [
  'jobId',
  'deduplication',
  'delay',
  'runAt',
  'timeoutMs',
  'priority',
  'attempts',
  'backoff',
  'dependsOn',
  'group',
] as const
const DEDUP_KEYS = ['id', 'ttl', 'extend', 'replace'] as const
const BACKOFF_KEYS = ['type', 'delay', 'jitter'] as const

/** One validated add. */
export interface AddRequest {
  name: string
  dataJson: string
  jobId: string | null
  dedupId: string | null
  dedupTtlMs: number | null
  extend: boolean
  replace: boolean
  delayMs: number | null
  /** runAt in epoch ms; the statements turn it into a delay on the database clock (_delay_until). */
  runAtMs: number | null
  /** How long one run may take, in ms (jobs.timeout_ms). */
  timeoutMs: number | null
  priority: number | null
  attempts: number | null
  backoff: Backoff | null
  dependsOn: string[] | null
  /** W3C traceparent of the add's span, stored with the job so that the worker's span continues the trace. */
  traceContext: string | null
  /** The job's group id (jobs.group_id); null: none. */
  groupId: string | null
}

function checkBackoff(value: unknown, field: string): Backoff {
  if (typeof value === 'number') return { type: 'fixed', delay: checkInteger(value, field, 0, MAX_DURATION_MS) }
  const b = checkOptions<Backoff>(value, field, BACKOFF_KEYS)
  if (b.type !== 'fixed' && b.type !== 'exponential')
    fail('INVALID_TYPE', `${field}.type`, "must be 'fixed' or 'exponential'")
  const backoff: Backoff = { type: b.type, delay: checkInteger(b.delay, `${field}.delay`, 0, MAX_DURATION_MS) }
  if (b.jitter !== undefined) {
    if (typeof b.jitter !== 'number' || !(b.jitter >= 0 && b.jitter <= 1))
      fail('OUT_OF_RANGE', `${field}.jitter`, 'must be a number from 0 to 1')
    backoff.jitter = b.jitter
  }
  return backoff
}

function checkGroup(value: unknown, field: string): string {
  if (!isPlainObject(value)) fail('INVALID_TYPE', field, 'must be { id }')
  const g = checkOptions<GroupOptions>(value, field, ['id'])
  const id = checkText(g.id, `${field}.id`, MAX_GROUP_ID_LENGTH * 4)
  // Characters as PostgreSQL's length() counts them (code points; the CHECK of jobs.group_id).
  if (id.length > MAX_GROUP_ID_LENGTH && [...id].length > MAX_GROUP_ID_LENGTH)
    fail('TOO_LONG', `${field}.id`, `must be at most ${MAX_GROUP_ID_LENGTH} characters`)
  return id
}

const NO_OPTIONS: Partial<JobOptions> = Object.freeze({})

/**
 * Checks one add's name, data and options; `field` prefixes error fields (e.g. `items[3]`).
 * Runs once per item of a batch: the common case (a name, small data, few options) allocates little.
 */
export function toAddRequest(
  name: unknown,
  data: unknown,
  options: unknown,
  field: string,
  maxDataBytes: number,
): AddRequest {
  const at = field === '' ? '' : `${field}.`
  const opts = options === undefined ? NO_OPTIONS : checkOptions<JobOptions>(options, `${at}opts`, JOB_OPTION_KEYS)
  const req: AddRequest = {
    name: checkText(name, `${at}name`),
    dataJson: serializeData(data === undefined ? {} : data, `${at}data`, maxDataBytes),
    jobId: opts.jobId === undefined ? null : checkText(opts.jobId, `${at}opts.jobId`),
    dedupId: null,
    dedupTtlMs: null,
    extend: false,
    replace: false,
    delayMs: opts.delay === undefined ? null : checkInteger(opts.delay, `${at}opts.delay`, 0, MAX_DURATION_MS),
    runAtMs: opts.runAt === undefined ? null : checkRunAt(opts.runAt, `${at}opts.runAt`),
    timeoutMs:
      opts.timeoutMs === undefined ? null : checkInteger(opts.timeoutMs, `${at}opts.timeoutMs`, 1, MAX_TIMER_MS),
    priority: opts.priority === undefined ? null : checkInteger(opts.priority, `${at}opts.priority`, 0),
    attempts: opts.attempts === undefined ? null : checkInteger(opts.attempts, `${at}opts.attempts`, 1),
    backoff: opts.backoff === undefined ? null : checkBackoff(opts.backoff, `${at}opts.backoff`),
    dependsOn: null,
    traceContext: null,
    groupId: opts.group === undefined ? null : checkGroup(opts.group, `${at}opts.group`),
  }
  if (req.delayMs !== null && req.runAtMs !== null)
    fail('CONFLICTING_OPTIONS', `${at}opts.runAt`, 'give delay or runAt, not both')
  if (opts.deduplication !== undefined) {
    const f = `${at}opts.deduplication`
    if (!isPlainObject(opts.deduplication)) fail('INVALID_TYPE', f, 'must be a plain object')
    const d = checkOptions<DeduplicationOptions>(opts.deduplication, f, DEDUP_KEYS)
    req.dedupId = checkText(d.id, `${f}.id`)
    req.dedupTtlMs = d.ttl === undefined ? null : checkInteger(d.ttl, `${f}.ttl`, 1, MAX_DURATION_MS)
    req.extend = d.extend === undefined ? false : checkBoolean(d.extend, `${f}.extend`)
    req.replace = d.replace === undefined ? false : checkBoolean(d.replace, `${f}.replace`)
    if (req.extend && !req.replace && req.dedupTtlMs === null)
      fail('REQUIRED', `${f}.ttl`, 'extend needs a ttl to extend')
  }
  if (opts.dependsOn !== undefined) {
    const f = `${at}opts.dependsOn`
    if (!Array.isArray(opts.dependsOn)) fail('INVALID_TYPE', f, 'must be an array of job ids')
    req.dependsOn = opts.dependsOn.map((id, i) => checkJobIdRef(id, `${f}[${i}]`))
  }
  return req
}

/**
 * True when the add needs no decision: no jobId, key or dependency (sql/add-plain-jobs.sql takes a batch of them).
 * A runAt goes through add_job() too: the plain statements answer a due time the client computes from the delay.
 */
export function isPlain(r: AddRequest): boolean {
  return r.jobId === null && r.dedupId === null && r.dependsOn === null && r.runAtMs === null
}

const BULK_ITEM_KEYS = ['name', 'data', 'opts'] as const

/** Checks every item of an addBulk call (`{ name, data, opts }`), naming a bad one `items[i]`. */
export function toAddRequests(items: unknown, maxDataBytes: number): AddRequest[] {
  if (!Array.isArray(items)) fail('INVALID_TYPE', 'items', 'must be an array')
  const reqs = new Array<AddRequest>(items.length)
  for (let i = 0; i < items.length; i++) {
    const field = `items[${i}]`
    const it = checkOptions<{ name: unknown; data: unknown; opts?: unknown }>(items[i], field, BULK_ITEM_KEYS)
    reqs[i] = toAddRequest(it.name, it.data, it.opts, field, maxDataBytes)
  }
  return reqs
}
