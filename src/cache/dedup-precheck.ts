// queue.add with the Redis layer: a plain duplicate of a key held with a TTL answered from Redis; every keyed add's answer remembered after it commits.

import { type AdmissionRow, type AnswerRow, admissionFromAnswer } from '../admission/answers.js'
import { addJobParams } from '../admission/params.js'
import type { AddRequest } from '../admission/request.js'
import type { AdmissionTarget, KeyedAdmission } from '../admission/admit.js'
import { prepared } from '../db/prepared.js'
import type { Cache } from './cache.js'
import { dedupFact } from './keys.js'
import { settle, settleOf } from './settle.js'

/** The cache as an add sees it: `inCallerTx` when the add runs in the caller's transaction (never read, never written). */
interface CacheScope {
  cache: Cache
  inCallerTx: boolean
}

/** The columns sql/add-job-cached.sql adds to the answer (see _cache_key_state in the baseline migration). */
interface CachedAnswerRow extends AnswerRow {
  cache_owned: boolean | null
  cache_expires_ms: number | null
  cache_epoch: string | null
  cache_will_bump: boolean | null
  cache_now_ms: number | null
  cache_settle_ms: number | null
}

/**
 * What Redis may answer: a plain duplicate (a key, no extend or replace, no jobId: its rule comes first, no dependsOn:
 * a missing dependency is an error before the key is looked at), outside a caller's transaction (which may have
 * removed the key itself).
 */
function answerable(req: AddRequest, scope: CacheScope): boolean {
  return !scope.inCallerTx && !req.extend && !req.replace && req.jobId === null && req.dependsOn === null
}

/** How queue.add decides a keyed add with the cache on (admit.ts calls it), in or outside a caller's transaction. */
export function keyedAdmission(cache: Cache, inCallerTx: boolean): KeyedAdmission {
  return (t, req, inPostgres) => admitKeyed(t, { cache, inCallerTx }, req, inPostgres)
}

/**
 * A keyed add (`req.dedupId` set) with the cache: answered from Redis when it may be; otherwise by Postgres
 * (`inPostgres` inside a caller's transaction, sql/add-job-cached.sql outside one), holding the bucket first when it
 * may end the key's fact (extend, replace) and publishing the bucket's epoch after a commit that bumped it. An entry is
 * written when Postgres answers a repeat (the key was held before this add): keys added once take no memory in Redis.
 */
async function admitKeyed(
  t: AdmissionTarget,
  scope: CacheScope,
  req: AddRequest,
  inPostgres: () => Promise<AdmissionRow>,
): Promise<AdmissionRow> {
  const { cache } = scope
  const fact = dedupFact(t.queue, req.dedupId as string)
  if (answerable(req, scope)) {
    const payload = await cache.lookup(fact)
    const hit = payload === null ? null : admissionFromEntry(payload, t.queue, req.dedupId as string)
    if (hit !== null) return hit
  }
  const ending = req.extend || req.replace
  const held = ending && (await cache.invalidation.hold([fact.bucket]))
  try {
    if (scope.inCallerTx) return await inPostgres()
    const sent = cache.clock.mark()
    const [row] = await t.execute<CachedAnswerRow>(prepared('add-job-cached', t.schema), addJobParams(t.queue, req))
    const answer = row as CachedAnswerRow
    const admission = admissionFromAnswer(answer, req, t.queue)
    cache.clock.sample(sent, answer.cache_now_ms)
    // An end Redis could not be told of is answered once every cache has heard it (docs/redis.md).
    if (answer.cache_will_bump === true && !(await cache.invalidation.publish([fact.bucket])))
      await settle(settleOf([answer]))
    const repeat = admission.error === null && admission.outcome !== 'added' && admission.outcome !== 'replaced'
    if (repeat && answer.cache_owned === true && answer.cache_expires_ms !== null && answer.cache_now_ms !== null) {
      cache.remember(
        fact,
        Number(answer.cache_epoch),
        entryOf(admission),
        Number(answer.cache_expires_ms),
        Number(answer.cache_now_ms),
      )
    }
    return admission
  } finally {
    if (held && !scope.inCallerTx) await cache.invalidation.release([fact.bucket])
  }
}

const time = (d: Date | null | undefined): number | null => (d === null || d === undefined ? null : d.getTime())
const date = (ms: unknown): Date | null => (typeof ms === 'number' ? new Date(ms) : null)

/**
 * The owner as cached, as a JSON array (trailing nulls dropped; its queue and key are the entry's name): every field a
 * Job shows. id, name, jobId, data, priority, maxAttempts, backoff and createdAt never change; state, attempts, runAt,
 * startedAt, finishedAt, result, progress, failedReason, stacktrace and cancelRequestedAt are as of the moment the
 * entry was written.
 */
function entryOf(r: AdmissionRow): string {
  const fields = [
    r.id,
    r.name,
    r.job_id,
    r.data,
    r.state,
    r.priority,
    time(r.run_at),
    r.attempts,
    r.max_attempts,
    r.backoff ?? null,
    time(r.created_at),
    time(r.started_at),
    time(r.finished_at),
    r.last_error,
    r.error_stack,
    r.result ?? null,
    r.progress ?? null,
    time(r.cancel_requested_at),
  ]
  while (fields.length > 0 && fields[fields.length - 1] === null) fields.pop()
  return JSON.stringify(fields)
}

/**
 * The answer a hit gives: the owner as cached, decided 'duplicate-key' (what Postgres answers for a held key); null
 * for a value that is not an entry of this layer (then Postgres answers).
 */
function admissionFromEntry(payload: string, queue: string, key: string): AdmissionRow | null {
  let fields: unknown[]
  try {
    fields = JSON.parse(payload) as unknown[]
  } catch {
    return null
  }
  if (!Array.isArray(fields) || typeof fields[0] !== 'string' || typeof fields[1] !== 'string') return null
  const [
    id,
    name,
    jobId,
    data,
    state,
    priority,
    runAt,
    attempts,
    maxAttempts,
    backoff = null,
    createdAt,
    startedAt = null,
    finishedAt = null,
    lastError = null,
    errorStack = null,
    result = null,
    progress = null,
    cancelRequestedAt = null,
  ] = fields
  return {
    outcome: 'duplicate-key',
    error: null,
    id,
    queue,
    name,
    job_id: jobId,
    data,
    state,
    priority,
    run_at: date(runAt),
    attempts,
    max_attempts: maxAttempts,
    backoff,
    dedup_key: key,
    lock_token: null,
    locked_until: null,
    last_error: lastError,
    error_stack: errorStack,
    created_at: date(createdAt),
    started_at: date(startedAt),
    finished_at: date(finishedAt),
    result,
    progress,
    cancel_requested_at: date(cancelRequestedAt),
  } as AdmissionRow
}
