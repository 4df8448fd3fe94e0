// <schema>.add_job() from plain SQL and queue.add give the same answers to the same sequence (docs/deduplication.md#from-sql).

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeduplicationError, type JobOptions, Queue, ValidationError } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('sql_add_job')
})
afterAll(async () => {
  await db.drop()
})

/** One add; `dependsOn` names earlier steps (or 'missing' for an id that does not exist). */
interface Spec {
  name: string
  data: Record<string, unknown>
  jobId?: string
  key?: string
  ttl?: number
  extend?: boolean
  replace?: boolean
  delay?: number
  priority?: number
  attempts?: number
  backoff?: { type: 'fixed' | 'exponential'; delay: number }
  dependsOn?: number[] | 'missing'
}
type Step = { add: Spec } | { mark: number; state: string }
interface Answer {
  outcome: string | null
  error: string | null
  id: string | null
  state: string | null
  data: unknown
}
type Adder = (spec: Spec, dependsOn: string[] | undefined, jobId: string | undefined) => Promise<Answer>

const MISSING_ID = '999999999999'

// Every rule of docs/deduplication.md's jobId rules and decision table that can be reached without a worker.
const STEPS: Step[] = [
  { add: { name: 'plain', data: { n: 0 } } },
  { add: { name: 'id', data: { n: 1 }, jobId: 'j1' } },
  { add: { name: 'id', data: { n: 2 }, jobId: 'j1' } },
  { mark: 1, state: 'completed' },
  { add: { name: 'id', data: { n: 4 }, jobId: 'j1' } },
  { add: { name: 'key', data: { n: 5 }, key: 'k1' } },
  { add: { name: 'key', data: { n: 6 }, key: 'k1' } },
  { mark: 5, state: 'failed' },
  { add: { name: 'key', data: { n: 8 }, key: 'k1' } },
  { add: { name: 'ttl', data: { n: 9 }, key: 'k2', ttl: 60_000 } },
  { add: { name: 'ttl', data: { n: 10 }, key: 'k2', ttl: 60_000, extend: true } },
  { add: { name: 'ttl', data: { n: 11 }, key: 'k2', ttl: 60_000 } },
  { mark: 9, state: 'active' },
  { add: { name: 'ttl', data: { n: 13 }, key: 'k2', ttl: 60_000, extend: true } },
  { add: { name: 'ttl', data: { n: 14 }, key: 'k2', ttl: 60_000 } },
  { add: { name: 'ttl', data: { n: 15 }, key: 'k2', ttl: 60_000, replace: true } },
  { add: { name: 'ttl', data: { n: 16 }, key: 'k2', ttl: 60_000, replace: true, extend: true } },
  {
    add: {
      name: 'opts',
      data: { n: 17 },
      key: 'k3',
      ttl: 1,
      delay: 5_000,
      priority: 3,
      attempts: 4,
      backoff: { type: 'exponential', delay: 250 },
    },
  },
  { add: { name: 'both', data: { n: 18 }, jobId: 'j2', key: 'k1' } },
  { add: { name: 'both', data: { n: 19 }, jobId: 'j1', key: 'k9' } },
  { add: { name: 'child', data: { n: 20 }, dependsOn: [4] } },
  { add: { name: 'parent', data: { n: 21 }, key: 'k4' } },
  { add: { name: 'child', data: { n: 22 }, dependsOn: [21] } },
  { add: { name: 'parent', data: { n: 23 }, key: 'k4', replace: true } },
  { add: { name: 'ghost', data: { n: 24 }, dependsOn: 'missing' } },
  { mark: 16, state: 'completed' },
  { add: { name: 'ttl', data: { n: 26 }, key: 'k2', ttl: 60_000 } },
  { add: { name: 'ttl', data: { n: 27 }, key: 'k2', ttl: 60_000, extend: true } },
  { add: { name: 'ttl', data: { n: 28 }, key: 'k2', ttl: 60_000, replace: true } },
]

/** Runs STEPS through one adder; ids in the answers become the index of the step that first returned them. */
async function run(queue: string, prefix: string, adder: Adder) {
  const ids: (string | null)[] = []
  const answers: (Omit<Answer, 'id'> & { ref: number | null })[] = []
  for (const step of STEPS) {
    if ('mark' in step) {
      await db.pool.query(`update "${db.schema}".jobs set state = $2 where id = $1`, [ids[step.mark], step.state])
      ids.push(null)
      answers.push({ outcome: 'marked', error: null, ref: null, state: step.state, data: null })
      continue
    }
    const spec = step.add
    const dependsOn =
      spec.dependsOn === undefined
        ? undefined
        : spec.dependsOn === 'missing'
          ? [MISSING_ID]
          : spec.dependsOn.map((i) => ids[i] as string)
    const answer = await adder(spec, dependsOn, spec.jobId === undefined ? undefined : `${prefix}${spec.jobId}`)
    ids.push(answer.id)
    const first = answer.id === null ? -1 : ids.indexOf(answer.id)
    answers.push({ outcome: answer.outcome, error: answer.error, ref: first, state: answer.state, data: answer.data })
  }
  const { rows: jobs } = await db.pool.query(
    `select id, name, data, state, regexp_replace(job_id, '^[a-z]+:', '') as job_id, dedup_key, priority, max_attempts, backoff,
            round(extract(epoch from run_at - created_at) * 1000)::int as delay_ms
     from "${db.schema}".jobs where queue = $1 order by id`,
    [queue],
  )
  const { rows: keys } = await db.pool.query(
    `select key, job_id, expires_at is null as no_ttl from "${db.schema}".dedup_keys where queue = $1 order by key`,
    [queue],
  )
  const ref = (id: string) => ids.indexOf(id)
  return {
    answers,
    jobs: jobs.map(({ id, ...row }) => ({ ...row, ref: ref(id) })),
    keys: keys.map(({ job_id, ...row }) => ({ ...row, ref: ref(job_id) })),
  }
}

/** add_job() called the way psql or a trigger would: named arguments, only those given, the default raise_rejection. */
function sqlAdder(queue: string): Adder {
  return async (spec, dependsOn, jobId) => {
    const args: [string, unknown, string?][] = [
      ['queue', queue],
      ['name', spec.name],
      ['data', JSON.stringify(spec.data), 'jsonb'],
    ]
    if (jobId !== undefined) args.push(['job_id', jobId])
    if (spec.key !== undefined) args.push(['dedup_id', spec.key])
    if (spec.ttl !== undefined) args.push(['dedup_ttl_ms', spec.ttl, 'bigint'])
    if (spec.extend !== undefined) args.push(['dedup_extend', spec.extend, 'boolean'])
    if (spec.replace !== undefined) args.push(['dedup_replace', spec.replace, 'boolean'])
    if (spec.delay !== undefined) args.push(['delay_ms', spec.delay, 'bigint'])
    if (spec.priority !== undefined) args.push(['priority', spec.priority, 'integer'])
    if (spec.attempts !== undefined) args.push(['max_attempts', spec.attempts, 'integer'])
    if (spec.backoff !== undefined) args.push(['backoff', JSON.stringify(spec.backoff), 'jsonb'])
    if (dependsOn !== undefined) args.push(['depends_on', dependsOn, 'bigint[]'])
    const text = `select (a).outcome, (a).error, ((a).job).id::text as id, ((a).job).state, ((a).job).data
      from "${db.schema}".add_job(${args.map(([n, , t], i) => `${n} => $${i + 1}${t ? `::${t}` : ''}`).join(', ')}) a`
    try {
      const { rows } = await db.pool.query(
        text,
        args.map(([, v]) => v),
      )
      return rows[0] as Answer
    } catch (err) {
      const e = err as { code?: string; detail?: string }
      if (e.code !== 'PO001') throw err
      return { outcome: null, error: e.detail ?? null, id: null, state: null, data: null }
    }
  }
}

function queueAdder(queue: Queue<Record<string, unknown>>): Adder {
  return async (spec, dependsOn, jobId) => {
    const opts: JobOptions = {}
    if (jobId !== undefined) opts.jobId = jobId
    if (spec.key !== undefined) {
      opts.deduplication = { id: spec.key }
      if (spec.ttl !== undefined) opts.deduplication.ttl = spec.ttl
      if (spec.extend !== undefined) opts.deduplication.extend = spec.extend
      if (spec.replace !== undefined) opts.deduplication.replace = spec.replace
    }
    if (spec.delay !== undefined) opts.delay = spec.delay
    if (spec.priority !== undefined) opts.priority = spec.priority
    if (spec.attempts !== undefined) opts.attempts = spec.attempts
    if (spec.backoff !== undefined) opts.backoff = spec.backoff
    if (dependsOn !== undefined) opts.dependsOn = dependsOn
    try {
      const job = await queue.add(spec.name, spec.data, opts)
      return { outcome: job.outcome, error: null, id: job.id, state: job.state, data: job.data }
    } catch (err) {
      if (
        err instanceof DeduplicationError ||
        (err instanceof ValidationError && err.code === 'DEPENDENCY_NOT_FOUND')
      ) {
        return { outcome: null, error: err.code, id: null, state: null, data: null }
      }
      throw err
    }
  }
}

describe('add_job() from SQL', () => {
  it('gives the same answers and leaves the same rows as queue.add for the same sequence', async () => {
    const queue = new Queue<Record<string, unknown>>('via-js', { connectionString: db.url, schema: db.schema })
    try {
      const viaSql = await run('via-sql', 'sql:', sqlAdder('via-sql'))
      const viaJs = await run('via-js', 'js:', queueAdder(queue))
      expect(viaSql).toEqual(viaJs)
      // The sequence reached every outcome and rejection; this pins what they were.
      expect(viaJs.answers.map((a) => a.outcome ?? a.error)).toEqual([
        'added',
        'added',
        'duplicate-job-id',
        'marked',
        'added',
        'added',
        'duplicate-key',
        'marked',
        'added',
        'added',
        'extended',
        'duplicate-key',
        'marked',
        'EXTEND_NOT_PENDING',
        'duplicate-key',
        'replaced',
        'replaced',
        'added',
        'duplicate-key',
        'duplicate-job-id',
        'added',
        'added',
        'added',
        'REPLACE_HAS_DEPENDENTS',
        'DEPENDENCY_NOT_FOUND',
        'marked',
        'duplicate-key',
        'EXTEND_NOT_PENDING',
        'replaced',
      ])
      expect(viaJs.answers.map((a) => a.ref)).toEqual([
        0,
        1,
        1,
        null,
        4,
        5,
        5,
        null,
        8,
        9,
        9,
        9,
        null,
        -1,
        9,
        15,
        16,
        17,
        8,
        4,
        20,
        21,
        22,
        -1,
        -1,
        null,
        16,
        -1,
        28,
      ])
      const job = (ref: number) => viaJs.jobs.find((j) => j.ref === ref)
      expect(job(17)).toMatchObject({
        state: 'delayed',
        priority: 3,
        max_attempts: 4,
        delay_ms: 5_000,
        backoff: { type: 'exponential', delay: 250 },
      })
      expect(job(20)?.state).toBe('waiting-children')
      expect(job(15)).toBeUndefined() // superseded by the next replace while pending
      expect(job(9)?.state).toBe('active') // replaced while running: keeps running
    } finally {
      await queue.close()
    }
  })

  it('raises SQLSTATE PO001 on EXTEND_NOT_PENDING by default, and returns the rejection with raise_rejection => false', async () => {
    const q = 'raise'
    const add = (extra: string) =>
      db.pool.query(
        `select (a).outcome, (a).error, ((a).job).id::text as id
       from "${db.schema}".add_job(queue => $1, name => 'push', dedup_id => 'rk', dedup_ttl_ms => 60000${extra}) a`,
        [q],
      )
    const owner = (await add('')).rows[0]
    expect(owner.outcome).toBe('added')
    await db.pool.query(`update "${db.schema}".jobs set state = 'active' where id = $1`, [owner.id])

    const err = await add(', dedup_extend => true').catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'PO001', detail: 'EXTEND_NOT_PENDING' })
    expect((err as Error).message).toContain('Duplicate unique_key (extended TTL)')

    const quiet = await add(', dedup_extend => true, raise_rejection => false')
    expect(quiet.rows).toEqual([{ outcome: null, error: 'EXTEND_NOT_PENDING', id: owner.id }])

    const { rows } = await db.pool.query(
      `select (select count(*)::int from "${db.schema}".jobs where queue = $1) as jobs,
              (select job_id::text from "${db.schema}".dedup_keys where queue = $1 and key = 'rk') as key_owner`,
      [q],
    )
    expect(rows[0]).toEqual({ jobs: 1, key_owner: owner.id })
  })

  it('add_jobs() raises a rejected item as PO001 by default (nothing added), and returns it with raise_rejection => false', async () => {
    const q = 'raise-bulk'
    await db.pool.query(
      `select "${db.schema}".add_job(queue => $1, name => 'push', dedup_id => 'bk', dedup_ttl_ms => 60000)`,
      [q],
    )
    await db.pool.query(`update "${db.schema}".jobs set state = 'active' where queue = $1`, [q])
    const items = JSON.stringify([{ name: 'first' }, { name: 'push', dedupId: 'bk', dedupTtlMs: 60000, extend: true }])
    const err = await db.pool
      .query(`select * from "${db.schema}".add_jobs($1, $2::jsonb)`, [q, items])
      .catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'PO001', detail: 'EXTEND_NOT_PENDING' })
    const quiet = await db.pool.query(
      `select (a).ordinal, (a).outcome, (a).error from "${db.schema}".add_jobs($1, $2::jsonb, raise_rejection => false) a`,
      [q, items],
    )
    expect(quiet.rows).toEqual([{ ordinal: 2, outcome: null, error: 'EXTEND_NOT_PENDING' }])
    const { rows } = await db.pool.query(`select name from "${db.schema}".jobs where queue = $1`, [q])
    expect(rows).toEqual([{ name: 'push' }])
  })

  it('add_jobs() refuses an item key it does not know (a "jobid" typo) with 22023 naming it, before adding anything', async () => {
    const err = await db.pool
      .query(`select * from "${db.schema}".add_jobs('typo', $1::jsonb)`, [
        JSON.stringify([{ name: 'ok' }, { name: 'push', jobid: 'j-typo' }]),
      ])
      .catch((e: unknown) => e)
    expect(err).toMatchObject({ code: '22023' })
    expect((err as Error).message).toContain('jobid')
    const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where queue = 'typo'`)
    expect(rows[0].n).toBe(0)
  })

  it('the table refuses from SQL what queue.add refuses: a queue name off the pattern, an empty or 256-byte name, jobId or key', async () => {
    const tries: Array<[string, string]> = [
      ['bad queue!', 'push'],
      ['', 'push'],
      ['_q', 'push'],
      ['qé', 'push'],
      ['q'.repeat(129), 'push'],
      ['q', ''],
      ['q', 'é'.repeat(128)],
    ]
    for (const [queue, name] of tries) {
      const err = await db.pool
        .query(`select "${db.schema}".add_job(queue => $1, name => $2)`, [queue, name])
        .catch((e: unknown) => e)
      // The error names the limit it broke.
      const constraint = queue === 'q' ? 'jobs_name_bytes' : 'jobs_queue_name'
      expect(err, `${queue}/${name}`).toMatchObject({ code: '23514', constraint })
    }
    for (const [param, column] of [
      ['job_id', 'job_id'],
      ['dedup_id', 'dedup_key'],
    ]) {
      const err = await db.pool
        .query(`select "${db.schema}".add_job(queue => 'q', name => 'push', ${param} => $1)`, ['k'.repeat(256)])
        .catch((e: unknown) => e)
      expect(err, param).toMatchObject({ code: '23514', constraint: `jobs_${column}_bytes` })
    }
    // A row written by hand meets the same limits (an UPDATE too).
    const hand = await db.pool
      .query(`insert into "${db.schema}".jobs (queue, name, data) values ('q', '', '{}')`)
      .catch((e: unknown) => e)
    expect(hand).toMatchObject({ code: '23514', constraint: 'jobs_name_bytes' })
    const {
      rows: [ok],
    } = await db.pool.query(`select ((a).job).id from "${db.schema}".add_job(queue => 'q', name => 'push') a`)
    const moved = await db.pool
      .query(`update "${db.schema}".jobs set queue = 'no way' where id = $1`, [ok.id])
      .catch((e: unknown) => e)
    expect(moved).toMatchObject({ code: '23514', constraint: 'jobs_queue_name' })
    await db.pool.query(`delete from "${db.schema}".jobs where id = $1`, [ok.id])
    const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where queue = 'q'`)
    expect(rows[0].n).toBe(0)
    // The longest and the widest names the pattern allows are stored.
    for (const queue of ['q'.repeat(128), '0a_.:-Z']) {
      const ok = await db.pool.query(`select (a).outcome from "${db.schema}".add_job(queue => $1, name => 'push') a`, [
        queue,
      ])
      expect(ok.rows, queue).toEqual([{ outcome: 'added' }])
    }
  })

  it('works with only queue and name, as a trigger or psql would call it', async () => {
    const { rows } = await db.pool.query(
      `select (a).outcome, ((a).job).data, ((a).job).state, ((a).job).max_attempts from "${db.schema}".add_job(queue => 'minimal', name => 'push') a`,
    )
    expect(rows).toEqual([{ outcome: 'added', data: {}, state: 'waiting', max_attempts: 1 }])
  })
})
