// Calls <schema>.add_job() and <schema>.add_jobs() as psql, a trigger or another client would: the one place that knows their signatures.

import type pg from 'pg'

/** The columns of a job that an admission shows (id as text, as every client sees it). */
export interface SqlJob {
  id: string
  name: string
  state: string
  data: unknown
  job_id: string | null
  dedup_key: string | null
  priority: number
  max_attempts: number
  attempts: number
}

/**
 * How add_job()/add_jobs() decided. `job` is the job that answers (or the owner behind a rejection), null when there
 * is none, and 'unknown' when add_job() raised (SQLSTATE PO001), which names the rejection but not the owner.
 */
export interface SqlAdmission {
  ordinal: number | null
  outcome: string | null
  error: string | null
  job: SqlJob | null | 'unknown'
}

/** add_job()'s arguments; anything left undefined is not passed, so the function's own default applies. */
export interface SqlAddArgs {
  queue: string
  name: string
  data: unknown
  jobId?: string
  dedupId?: string
  dedupTtlMs?: number
  dedupExtend?: boolean
  dedupReplace?: boolean
  delayMs?: number
  /** run_at, a timestamptz literal. */
  runAt?: string
  timeoutMs?: number
  priority?: number
  maxAttempts?: number
  dependsOn?: string[]
  /** false: a rejection comes back as a row; undefined: the default, which raises PO001. */
  raiseRejection?: boolean
}

/** One add_jobs() item: the keys the migration documents (name, data, jobId, dedupId, dedupTtlMs, …). */
export interface SqlBulkItem {
  name: string
  data: unknown
  jobId?: string
  dedupId?: string
  dedupTtlMs?: number
  extend?: boolean
  replace?: boolean
  delayMs?: number
  /** Epoch ms. */
  runAt?: number
  timeoutMs?: number
  priority?: number
  attempts?: number
  dependsOn?: string[]
}

/** A pg Pool or a checked-out client inside the test's transaction. */
export type SqlRunner = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>

const JOB_COLUMNS = `((a).job).id::text as id, ((a).job).name as name, ((a).job).state as state, ((a).job).data as data,
  ((a).job).job_id as job_id, ((a).job).dedup_key as dedup_key, ((a).job).priority as priority,
  ((a).job).max_attempts as max_attempts, ((a).job).attempts as attempts`

type AdmissionRow = Omit<SqlJob, 'id'> & {
  id: string | null
  ordinal: number | null
  outcome: string | null
  error: string | null
}

function toAdmission(r: AdmissionRow): SqlAdmission {
  const { ordinal, outcome, error, id, ...job } = r
  return { ordinal, outcome, error, job: id === null ? null : { id, ...job } }
}

/** select … from <schema>.add_job(queue => …, name => …, …): named arguments, only those given. */
export async function sqlAddJob(db: SqlRunner, schema: string, a: SqlAddArgs): Promise<SqlAdmission> {
  const args: [string, unknown, string][] = [
    ['queue', a.queue, 'text'],
    ['name', a.name, 'text'],
    ['data', JSON.stringify(a.data), 'jsonb'],
  ]
  const opt = (name: string, value: unknown, type: string) => {
    if (value !== undefined) args.push([name, value, type])
  }
  opt('job_id', a.jobId, 'text')
  opt('dedup_id', a.dedupId, 'text')
  opt('dedup_ttl_ms', a.dedupTtlMs, 'bigint')
  opt('dedup_extend', a.dedupExtend, 'boolean')
  opt('dedup_replace', a.dedupReplace, 'boolean')
  opt('delay_ms', a.delayMs, 'bigint')
  opt('run_at', a.runAt, 'timestamptz')
  opt('timeout_ms', a.timeoutMs, 'integer')
  opt('priority', a.priority, 'integer')
  opt('max_attempts', a.maxAttempts, 'integer')
  opt('depends_on', a.dependsOn, 'bigint[]')
  opt('raise_rejection', a.raiseRejection, 'boolean')
  const text = `select (a).ordinal, (a).outcome, (a).error, ${JOB_COLUMNS}
    from "${schema}".add_job(${args.map(([n, , t], i) => `${n} => $${i + 1}::${t}`).join(', ')}) a`
  try {
    const { rows } = await db.query<AdmissionRow>(
      text,
      args.map(([, v]) => v),
    )
    return toAdmission(rows[0] as AdmissionRow)
  } catch (err) {
    const e = err as { code?: string; detail?: string }
    if (e.code !== 'PO001') throw err
    return { ordinal: null, outcome: null, error: e.detail ?? null, job: 'unknown' }
  }
}

/**
 * select … from <schema>.add_jobs(queue, items, raise_rejection => false): one row per item by ordinal, or a single row
 * carrying the rejection (by default add_jobs raises it as PO001: test/sql-add-job.test.ts).
 */
export async function sqlAddJobs(
  db: SqlRunner,
  schema: string,
  queue: string,
  items: readonly SqlBulkItem[],
): Promise<SqlAdmission[]> {
  const { rows } = await db.query<AdmissionRow>(
    `select (a).ordinal, (a).outcome, (a).error, ${JOB_COLUMNS} from "${schema}".add_jobs($1, $2::jsonb, raise_rejection => false) a order by (a).ordinal`,
    [queue, JSON.stringify(items)],
  )
  return rows.map(toAdmission)
}
