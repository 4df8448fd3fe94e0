// The physical limits of each workload on this run, measured from Node on pgonce's own jobs table: what the server and
// the driver do with no queue logic at all. Written against the table's columns (queue, name, data inserted, every
// other column left to its default; the claim orders by priority, run_at, id), never against pgonce's SQL or code.

import pg from 'pg'
import { connect } from '../dev/postgres-server.js'
import { migrate } from '../src/index.js'
import type { RunSettings, Sizes } from './config.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { errorText, percentile, perSecond, runProducers, within } from './measure.js'
import { PGONCE_SCHEMA } from './systems/pgonce.js'
import type { WorkloadId } from './systems/system.js'
import { type Mode, maintain } from './workloads/context.js'
import { idleSamples, SETTLE_MS } from './workloads/pickup-latency.js'

export type LimitId = 'insert1' | 'insert16' | 'insert1000' | 'insertNotify' | 'claimDeleteW4' | 'claimDeleteW8'

export interface LimitResult {
  ops: number
  ms: number
  perSecond?: number
  p50Ms?: number
  p99Ms?: number
  /** What was measured beyond the label, e.g. the plan the claim used. */
  note?: string
}

/** Each workload's limit (W7, a read of a held key, has none). */
export const LIMIT_OF: Partial<Record<WorkloadId, LimitId>> = {
  W1: 'insert1',
  W2: 'insert16',
  W3: 'insert1000',
  W4: 'claimDeleteW4',
  W5: 'insert16',
  W6: 'insertNotify',
  W8: 'claimDeleteW8',
}

export const LIMIT_LABEL: Record<LimitId, string> = {
  insert1: 'one-row INSERT, awaited one after another over 1 connection',
  insert16: 'one-row INSERT from 16 producers, each on a connection of its own',
  insert1000: '1,000-row INSERT … SELECT from `unnest($2::text[], $3::jsonb[])`, one after another over 1 connection',
  insertNotify: 'one statement inserting a row and calling pg_notify, in the W6 loop (same idle pause), until a second, LISTENing connection has the notification (p50 / p99 ms)',
  claimDeleteW4: 'claim-and-delete loop over the same backlog, 1 connection, no handlers: `delete from jobs where ctid = any(array(select ctid from jobs where queue = $1 and state = <the rows\' state> and run_at <= now() order by priority, run_at, id limit 500 for update skip locked)) returning id, name, data`, until the backlog is gone',
  claimDeleteW8: 'the same loop over a backlog of W8\'s size, timed over W8\'s window',
}

export interface LimitPass {
  mode: Mode
  results: Partial<Record<LimitId, LimitResult>>
  errors: Partial<Record<LimitId, string>>
}

const JOBS = `"${PGONCE_SCHEMA}".jobs`
const CHANNEL = 'pgonce_bench_limit'
const CLAIM_BATCH = 500

/** A neutral value per type, for a column the table requires but gives no default (e.g. priority once it has none). */
const NEUTRAL: Record<string, string> = {
  smallint: '1', integer: '1', bigint: '1', numeric: '1', boolean: 'false', text: "''", 'character varying': "''",
  jsonb: "'{}'", json: "'{}'", 'timestamp with time zone': 'now()', 'timestamp without time zone': 'now()', uuid: 'gen_random_uuid()',
}

/**
 * The statements, against the table as it is: queue, name and data, plus any other column that is NOT NULL without a
 * default (filled with NEUTRAL, and named in the note). Everything else is left to its default.
 */
interface Statements {
  insertOne: string
  insertMany: string
  insertNotify: string
  /** The extra columns filled, e.g. `priority = 1`; empty when the defaults cover everything. */
  filled: string[]
}

export async function statementsFor(client: pg.Client): Promise<Statements> {
  const { rows } = await client.query<{ column_name: string; data_type: string }>(
    `select column_name, data_type from information_schema.columns
     where table_schema = $1 and table_name = 'jobs' and is_nullable = 'NO' and column_default is null
       and is_identity = 'NO' and is_generated = 'NEVER' and column_name not in ('queue', 'name', 'data')
     order by ordinal_position`, [PGONCE_SCHEMA])
  const extra = rows.map((r) => {
    const value = NEUTRAL[r.data_type]
    if (!value) throw new Error(`jobs.${r.column_name} (${r.data_type}) is NOT NULL without a default: no neutral value known`)
    return { name: `"${r.column_name}"`, value, shown: `${r.column_name} = ${value}` }
  })
  const columns = ['queue', 'name', 'data', ...extra.map((e) => e.name)].join(', ')
  const values = extra.map((e) => `, ${e.value}`).join('')
  return {
    insertOne: `insert into ${JOBS} (${columns}) values ($1, $2, $3${values})`,
    insertMany: `insert into ${JOBS} (${columns}) select $1, u.name, u.data${values} from unnest($2::text[], $3::jsonb[]) as u(name, data)`,
    insertNotify: `with j as (insert into ${JOBS} (${columns}) values ($1, $2, $3${values}) returning id) select pg_notify($4, j.id::text) from j`,
    filled: extra.map((e) => e.shown),
  }
}

/** The claim: a literal state (read from the rows themselves) so that every plan can use a partial index on it. */
function claimSql(state: string): string {
  if (!/^[a-z_-]+$/.test(state)) throw new Error(`unexpected job state ${JSON.stringify(state)}`)
  return `delete from ${JOBS} where ctid = any(array(select ctid from ${JOBS} where queue = $1 and state = '${state}' and run_at <= now() ` +
    `order by priority, run_at, id limit ${CLAIM_BATCH} for update skip locked)) returning id, name, data`
}

const dataOf = (i: number): string => JSON.stringify({ i })
const batchOf = (from: number, count: number): [string[], string[]] =>
  [Array.from({ length: count }, () => 'job'), Array.from({ length: count }, (_, k) => dataOf(from + k))]

/** `total` rows (data `{ i }` from `first` on) in 1,000-row INSERTs, one after another; resolves with the elapsed ms. */
export async function insertBulk(client: pg.Client, insertMany: string, queue: string, first: number, total: number): Promise<number> {
  const started = performance.now()
  for (let from = 0; from < total; from += 1000) {
    const [names, datas] = batchOf(first + from, Math.min(1000, total - from))
    await client.query({ name: 'limit-insert-many', text: insertMany, values: [queue, names, datas] })
  }
  return performance.now() - started
}

type Probe = (url: string, admin: pg.Client, mode: Mode, sql: Statements) => Promise<LimitResult>

/** W1's limit: `w1Adds` sequential awaited one-row INSERTs over one connection. */
const insertOne = (n: number): Probe => async (url, admin, mode, sql) => {
  const client = await connect(url)
  try {
    for (let i = 0; i < 20; i++) await client.query({ name: 'limit-insert-one', text: sql.insertOne, values: ['warmup', 'job', dataOf(i)] })
    await maintain(admin, mode)
    const ms = await runProducers(n, 1, async (i) => {
      await client.query({ name: 'limit-insert-one', text: sql.insertOne, values: ['limit1', 'job', dataOf(i)] })
    })
    return { ops: n, ms, perSecond: perSecond(n, ms) }
  } finally {
    await client.end()
  }
}

/** W2's and W5's limit: `w2Adds` one-row INSERTs from 16 producers, each on a connection of its own. */
const insertSixteen = (n: number, producers: number): Probe => async (url, admin, mode, sql) => {
  const clients = await Promise.all(Array.from({ length: producers }, () => connect(url)))
  try {
    await Promise.all(clients.map(async (client) => {
      for (let i = 0; i < 5; i++) await client.query({ name: 'limit-insert-one', text: sql.insertOne, values: ['warmup', 'job', dataOf(i)] })
    }))
    await maintain(admin, mode)
    let next = 0
    const started = performance.now()
    await Promise.all(clients.map(async (client) => {
      for (let i = next++; i < n; i = next++) {
        await client.query({ name: 'limit-insert-one', text: sql.insertOne, values: ['limit16', 'job', dataOf(i)] })
      }
    }))
    const ms = performance.now() - started
    return { ops: n, ms, perSecond: perSecond(n, ms) }
  } finally {
    await Promise.all(clients.map((c) => c.end()))
  }
}

/** W3's limit: `w3Jobs` rows in 1,000-row INSERTs, one after another over one connection. */
const insertThousands = (n: number): Probe => async (url, admin, mode, sql) => {
  const client = await connect(url)
  try {
    await insertBulk(client, sql.insertMany, 'warmup', 0, 2000)
    await maintain(admin, mode)
    const ms = await insertBulk(client, sql.insertMany, 'limit1000', 0, n)
    return { ops: n, ms, perSecond: perSecond(n, ms) }
  } finally {
    await client.end()
  }
}

/**
 * W6's reference: the loop of W6 with no queue: after the same idle pause, one INSERT + pg_notify in one statement
 * (one implicit transaction), timed from the call until both the statement has returned and a second, LISTENing
 * connection of this process has received the notification.
 */
const insertNotify = (n: number, warmup: number, pauseMs: number): Probe => async (url, admin, mode, sql) => {
  const client = await connect(url)
  const listener = await connect(url)
  let heard: ((at: number) => void) | null = null
  listener.on('notification', () => {
    const at = performance.now()
    heard?.(at)
    heard = null
  })
  try {
    await listener.query(`listen ${CHANNEL}`)
    await maintain(admin, mode)
    const returned: number[] = []
    const sample = async (i: number): Promise<number> => {
      const notified = new Promise<number>((resolve) => {
        heard = resolve
      })
      const calledAt = performance.now()
      const statement = client.query({ name: 'limit-insert-notify', text: sql.insertNotify, values: ['limitnotify', 'job', dataOf(i), CHANNEL] })
        .then(() => returned.push(performance.now() - calledAt))
      const [, at] = await Promise.all([statement, within(notified, 30_000, `notification ${i}`)])
      return at - calledAt
    }
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
    await idleSamples(warmup, pauseMs, (i) => sample(-1 - i))
    returned.length = 0
    const started = performance.now()
    const samples = await idleSamples(n, pauseMs, sample)
    const ms = performance.now() - started
    return {
      ops: n,
      ms,
      p50Ms: percentile(samples, 50),
      p99Ms: percentile(samples, 99),
      note: `statement returned after ${percentile(returned, 50).toFixed(2)} ms p50`,
    }
  } finally {
    await listener.end()
    await client.end()
  }
}

/** The index (or scan) the claim's plan reads the jobs table with, for the note. */
async function claimPlan(client: pg.Client, sql: string, queue: string): Promise<string> {
  await client.query('begin')
  try {
    const { rows } = await client.query<{ 'QUERY PLAN': string }>({ text: `explain ${sql}`, values: [queue] })
    const scans = rows.map((r) => r['QUERY PLAN']).filter((line) => /Scan/.test(line)).map((line) => line.trim().replace(/\s+\(cost.*$/, ''))
    return scans.join('; ')
  } finally {
    await client.query('rollback')
  }
}

/**
 * W4's and W8's limit: `queued` jobs inserted (untimed), then a loop of claim-and-delete statements of 500 over one
 * connection, no handlers, timed from the first statement until `window` rows are gone (the whole backlog for W4).
 */
const claimDelete = (queued: number, window: number): Probe => async (url, admin, mode, sql) => {
  const client = await connect(url)
  try {
    await insertBulk(client, sql.insertMany, 'limitclaim', 0, queued)
    const { rows } = await client.query<{ state: string }>(`select state from ${JOBS} where queue = 'limitclaim' limit 1`)
    const claim = claimSql(rows[0]?.state ?? 'waiting')
    await maintain(admin, mode)
    const plan = await claimPlan(client, claim, 'limitclaim')
    let taken = 0
    const started = performance.now()
    while (taken < window) {
      const { rowCount } = await client.query({ name: 'limit-claim', text: claim, values: ['limitclaim'] })
      if (!rowCount) break
      taken += rowCount
    }
    const ms = performance.now() - started
    if (taken < window) throw new Error(`the claim took ${taken} of ${window} jobs`)
    return { ops: taken, ms, perSecond: perSecond(taken, ms), note: `of ${queued.toLocaleString('en-US')} queued; plan: ${plan}` }
  } finally {
    await client.end()
  }
}

/** Runs `probe` in the fresh database `database` (migrated by pgonce); drops it afterwards. */
async function inLimitDatabase<T>(serverUrl: string, database: string, fn: (url: string, admin: pg.Client, sql: Statements) => Promise<T>): Promise<T> {
  const url = await freshDatabase(serverUrl, database)
  try {
    await migrate({ connectionString: url, schema: PGONCE_SCHEMA })
    const admin = await connect(url)
    try {
      await admin.query('checkpoint').catch(() => {})
      return await fn(url, admin, await statementsFor(admin))
    } finally {
      await admin.end()
    }
  } finally {
    await dropDatabase(serverUrl, database)
  }
}

/**
 * One pass of the limit probes in `mode`, laid out like a system's pass: the insert probes one after another in one
 * database (each on the rows the previous ones left, as W1–W3 and W6 are), W4's and W8's each in a database of its own.
 * `insertsOnly`: the pass after the systems' passes, the insert probes alone (the claim-and-delete loops are measured
 * once: they load up to 1,000,000 rows first).
 */
export async function measureLimits(serverUrl: string, settings: RunSettings, mode: Mode, log: (message: string) => void,
  insertsOnly = false): Promise<LimitPass> {
  const s = settings.sizes
  const wanted = (id: WorkloadId): boolean => !settings.workloads || settings.workloads.includes(id)
  const pass: LimitPass = { mode, results: {}, errors: {} }
  const when = `${mode}${insertsOnly ? ', after the passes' : ''}`
  const run = async (id: LimitId, probe: Probe, url: string, admin: pg.Client, sql: Statements): Promise<void> => {
    try {
      const result = await probe(url, admin, mode, sql)
      if (sql.filled.length) result.note = `${result.note ? `${result.note}; ` : ''}also set (NOT NULL, no default): ${sql.filled.join(', ')}`
      pass.results[id] = result
      const figure = result.perSecond !== undefined ? `${Math.round(result.perSecond)}/s` : `p50 ${result.p50Ms?.toFixed(2)} ms, p99 ${result.p99Ms?.toFixed(2)} ms`
      log(`limit ${id} (${when}): ${figure}${result.note ? `; ${result.note}` : ''}`)
    } catch (err) {
      pass.errors[id] = errorText(err)
      log(`limit ${id} (${when}) failed: ${pass.errors[id]}`)
    }
  }
  await inLimitDatabase(serverUrl, 'pgonce_bench_limits', async (url, admin, sql) => {
    if (wanted('W1')) await run('insert1', insertOne(s.w1Adds), url, admin, sql)
    if (wanted('W2') || wanted('W5')) await run('insert16', insertSixteen(s.w2Adds, s.producers), url, admin, sql)
    if (wanted('W3')) await run('insert1000', insertThousands(s.w3Jobs), url, admin, sql)
    if (wanted('W6')) await run('insertNotify', insertNotify(s.w6Samples, s.warmup, s.w6PauseMs), url, admin, sql)
  })
  if (insertsOnly) return pass
  if (wanted('W4')) {
    await inLimitDatabase(serverUrl, 'pgonce_bench_limits_w4', (url, admin, sql) => run('claimDeleteW4', claimDeleteOf('W4', s), url, admin, sql))
  }
  if (wanted('W8') && s.w8Queued > 0) {
    await inLimitDatabase(serverUrl, 'pgonce_bench_limits_w8', (url, admin, sql) => run('claimDeleteW8', claimDeleteOf('W8', s), url, admin, sql))
  }
  return pass
}

/** W4's loop over the whole backlog, or W8's over its window of the deep backlog. */
const claimDeleteOf = (id: 'W4' | 'W8', s: Sizes): Probe => id === 'W4' ? claimDelete(s.w4Jobs, s.w4Jobs) : claimDelete(s.w8Queued, s.w8Window)

/** W4's or W8's claim-and-delete loop once, in a fresh database of its own: one side of a drain paired in rounds (bench/paired-drains.ts). */
export function measureClaimDelete(serverUrl: string, settings: RunSettings, mode: Mode, id: 'W4' | 'W8'): Promise<LimitResult> {
  return inLimitDatabase(serverUrl, `pgonce_bench_paired_loop_${id.toLowerCase()}`, (url, admin, sql) => claimDeleteOf(id, settings.sizes)(url, admin, mode, sql))
}
