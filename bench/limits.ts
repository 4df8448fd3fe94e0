// The physical limit of each workload: the bare statement on pgonce's own jobs table from Node, with no queue logic.
// Written against the table's columns (queue, name and data inserted, every other column left to its default; the
// claim orders by priority, run_at, id), never against pgonce's SQL or code, so that it survives a schema rewrite.

import pg from 'pg'
import { connect } from '../dev/postgres-server.js'
import { migrate } from '../src/index.js'
import type { Mode, Sizes } from './config.js'
import { benchDatabase, dropDatabase, freshDatabase } from './databases.js'
import { perSecond, runProducers } from './measure.js'
import { PGONCE_SCHEMA } from './systems/pgonce.js'
import type { WorkloadId } from './systems/system.js'
import { maintain } from './workloads/context.js'
import type { DrainId } from './workloads/drain.js'
import { type Timed, arrivals, handlerStartLoop, rate } from './workloads/timed.js'

export const LIMIT_LABEL: Partial<Record<WorkloadId, string>> = {
  W1: 'one-row INSERT, awaited one after another over one connection',
  W2: 'one-row INSERT from 16 producers, each on a connection of its own',
  W3: '1,000-row `INSERT … SELECT … FROM unnest($2::text[], $3::jsonb[])`, one after another over one connection',
  W4:
    'a claim-and-delete loop over the same backlog, one connection, no handlers: `delete from jobs where ctid = any(array(select ctid … ' +
    'order by priority, run_at, id limit 500 for update skip locked)) returning id, name, data`',
  W4B: "the claim-and-delete loop over W4's backlog (as W4)",
  W5: 'the one-row INSERT from 16 producers (as W2)',
  W6: 'one statement inserting a row and calling `pg_notify`, after the same idle pause, until a second, LISTENing connection has the notification',
  W8: "the claim-and-delete loop over W8's backlog, timed over W8's window",
}

const JOBS = `"${PGONCE_SCHEMA}".jobs`
const CHANNEL = 'pgonce_bench_limit'
const CLAIM_BATCH = 500

/** A neutral value per type, for a column the table requires but gives no default. */
const NEUTRAL: Record<string, string> = {
  smallint: '1',
  integer: '1',
  bigint: '1',
  numeric: '1',
  boolean: 'false',
  text: "''",
  jsonb: "'{}'",
  json: "'{}'",
  'timestamp with time zone': 'now()',
  uuid: 'gen_random_uuid()',
}

interface Statements {
  insertOne: string
  insertMany: string
  insertNotify: string
}

/** The statements against the table as it is: queue, name, data, and a neutral value for any other NOT NULL column without a default. */
async function statementsFor(client: pg.Client): Promise<Statements> {
  const { rows } = await client.query<{ column_name: string; data_type: string }>(
    `select column_name, data_type from information_schema.columns
     where table_schema = $1 and table_name = 'jobs' and is_nullable = 'NO' and column_default is null
       and is_identity = 'NO' and is_generated = 'NEVER' and column_name not in ('queue', 'name', 'data')
     order by ordinal_position`,
    [PGONCE_SCHEMA],
  )
  const extra = rows.map((r) => {
    const value = NEUTRAL[r.data_type]
    if (!value)
      throw new Error(`jobs.${r.column_name} (${r.data_type}) is NOT NULL without a default: no neutral value known`)
    return { name: `"${r.column_name}"`, value }
  })
  const columns = ['queue', 'name', 'data', ...extra.map((e) => e.name)].join(', ')
  const values = extra.map((e) => `, ${e.value}`).join('')
  return {
    insertOne: `insert into ${JOBS} (${columns}) values ($1, $2, $3${values})`,
    insertMany: `insert into ${JOBS} (${columns}) select $1, u.name, u.data${values} from unnest($2::text[], $3::jsonb[]) as u(name, data)`,
    insertNotify: `with j as (insert into ${JOBS} (${columns}) values ($1, $2, $3${values}) returning id) select pg_notify($4, j.id::text) from j`,
  }
}

const dataOf = (i: number): string => JSON.stringify({ i })

/** `total` rows in 1,000-row INSERTs, one after another; the elapsed ms. */
async function insertBulk(
  client: pg.Client,
  insertMany: string,
  queue: string,
  first: number,
  total: number,
): Promise<number> {
  const started = performance.now()
  for (let from = 0; from < total; from += 1000) {
    const count = Math.min(1000, total - from)
    const names = Array.from({ length: count }, () => 'job')
    const datas = Array.from({ length: count }, (_, k) => dataOf(first + from + k))
    await client.query({ name: 'limit-insert-many', text: insertMany, values: [queue, names, datas] })
  }
  return performance.now() - started
}

/** A fresh database migrated by this checkout's pgonce, its statements read on a connection that then only maintains it. */
async function limitDatabase(
  serverUrl: string,
  name: string,
): Promise<{ url: string; admin: pg.Client; sql: Statements; drop(): Promise<void> }> {
  const url = await freshDatabase(serverUrl, name)
  let admin: pg.Client | null = null
  const drop = async () => {
    await admin?.end()
    await dropDatabase(serverUrl, name)
  }
  try {
    await migrate({ connectionString: url, schema: PGONCE_SCHEMA })
    admin = await connect(url)
    return { url, admin, sql: await statementsFor(admin), drop }
  } catch (err) {
    await drop()
    throw err
  }
}

/**
 * The limit of W1, W2, W3, W5 or W6 as a side of the paired rounds, in a database of its own. Its statements go over
 * connections that run nothing else: a session that had read the catalog sent 1,000-row batches at ~55–65% of a
 * clean one's rate. W1, W2 and W5 insert into the queue pgonce's side uses: a queue that sorts before another inserts
 * mid-index (no rightmost fast path), which cost the limit ~18%.
 */
export async function openLimit(
  id: 'W1' | 'W2' | 'W3' | 'W5' | 'W6',
  serverUrl: string,
  s: Sizes,
  mode: Mode,
): Promise<{ timed: Timed; maintain(): Promise<void> }> {
  const { url, admin, sql, drop } = await limitDatabase(serverUrl, benchDatabase('round_limit'))
  const clients: pg.Client[] = []
  const end = () => Promise.all(clients.map((c) => c.end())).then(drop)
  try {
    for (let k = 0; k < (id === 'W2' || id === 'W5' ? s.producers : 1); k++) clients.push(await connect(url))
    const first = clients[0] as pg.Client
    const simple = (section: (n: number, from: number) => Promise<number>, warm: number): Timed => ({
      warm: () => section(warm, -warm).then(() => {}),
      run: async (n, from) => rate(n, await section(n, from)),
      check: async () => null,
      close: end,
    })
    let timed: Timed
    if (id === 'W6') {
      const listener = await connect(url)
      clients.push(listener)
      const heard = arrivals()
      listener.on('notification', heard.seen)
      await listener.query(`listen ${CHANNEL}`)
      const insert = (i: number) =>
        first.query({ name: 'limit-notify', text: sql.insertNotify, values: ['w6', 'job', dataOf(i), CHANNEL] })
      timed = await handlerStartLoop(insert, heard.next, s.w6PauseMs, s.warmup, end)
    } else if (id === 'W3') {
      timed = simple((n, from) => insertBulk(first, sql.insertMany, 'w3', from, n), 2 * s.bulkBatch)
    } else {
      const free = [...clients]
      const insert = async (i: number) => {
        const client = free.pop() as pg.Client
        await client
          .query({ name: 'limit-insert-one', text: sql.insertOne, values: [id.toLowerCase(), 'job', dataOf(i)] })
          .finally(() => free.push(client))
      }
      timed = simple((n, from) => runProducers(n, clients.length, (i) => insert(from + i)), s.warmup)
    }
    return { timed, maintain: () => maintain(admin, mode) }
  } catch (err) {
    await end()
    throw err
  }
}

/**
 * W4's (and W4B's) or W8's limit, once, in a fresh database: the backlog inserted (untimed), the mode's maintenance, then
 * claim-and-delete statements of 500 over one connection, timed until the window is gone; jobs/s.
 */
export async function claimDeleteDrain(serverUrl: string, id: DrainId, s: Sizes, mode: Mode): Promise<number> {
  const [queued, window] = id === 'W8' ? [s.w8Queued, s.w8Window] : [s.w4Jobs, s.w4Jobs]
  const { url, admin, sql, drop } = await limitDatabase(serverUrl, benchDatabase('round_loop'))
  const client = await connect(url).catch(async (err) => {
    await drop()
    throw err
  })
  try {
    await insertBulk(client, sql.insertMany, 'loop', 0, queued)
    // The rows' own state, as a literal, so that the plan can use a partial index on it.
    const { rows } = await client.query<{ state: string }>(`select state from ${JOBS} where queue = 'loop' limit 1`)
    const state = rows[0]?.state ?? 'waiting'
    if (!/^[a-z_-]+$/.test(state)) throw new Error(`unexpected job state ${JSON.stringify(state)}`)
    const claim =
      `delete from ${JOBS} where ctid = any(array(select ctid from ${JOBS} where queue = $1 and state = '${state}' ` +
      `and run_at <= now() order by priority, run_at, id limit ${CLAIM_BATCH} for update skip locked)) returning id, name, data`
    await maintain(admin, mode)
    let taken = 0
    const started = performance.now()
    while (taken < window) {
      const { rowCount } = await client.query({ name: 'limit-claim', text: claim, values: ['loop'] })
      if (!rowCount) throw new Error(`the claim took ${taken} of ${window} jobs`)
      taken += rowCount
    }
    return perSecond(taken, performance.now() - started)
  } finally {
    await client.end()
    await drop()
  }
}
