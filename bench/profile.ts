// `npx tsx bench/profile.ts`: where pgonce's time goes — statements, round trips and WAL per add and per job, the server-side ceilings of add_job/add_jobs/add_plain_jobs (pgbench), and what a NOTIFY costs.

import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { Queue, Worker, migrate } from '../src/index.js'
import { sqlFor } from '../src/db/sql-files.js'
import { startPostgres } from '../dev/postgres-server.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { perSecond, runProducers, within } from './measure.js'
import { findPgbench, tps } from './pgbench.js'
import { countRoundTrips, statementKinds } from './round-trips.js'
import { walBytesSince, walPosition } from './wal.js'
import { payloads } from './workloads/context.js'

interface Measured {
  label: string
  perSecond: number
  roundTripsPerOp: number
  walBytesPerOp: number
  /** Queries per op, by kind. */
  statements: [string, number][]
}

const log = (message: string): void => {
  process.stderr.write(`[profile] ${message}\n`)
}

const server = await startPostgres(log)
const database = 'pgonce_bench_profile'
const url = await freshDatabase(server.url, database)
const admin = new pg.Pool({ connectionString: url, max: 1 })
const roundTrips = countRoundTrips()

async function measure(label: string, ops: number, work: () => Promise<unknown>): Promise<Measured> {
  const wal = await walPosition(admin)
  const kindsBefore = statementKinds()
  const sentBefore = roundTrips()
  const started = performance.now()
  await work()
  const ms = performance.now() - started
  const sent = roundTrips() - sentBefore
  const statements = [...statementKinds()]
    .map(([kind, n]): [string, number] => [kind, (n - (kindsBefore.get(kind) ?? 0)) / ops])
    .filter(([, n]) => n > 0)
  const walBytes = await walBytesSince(admin, wal)
  const m = { label, perSecond: perSecond(ops, ms), roundTripsPerOp: sent / ops, walBytesPerOp: walBytes / ops, statements }
  log(`${label}: ${Math.round(m.perSecond)}/s`)
  return m
}

/** Drains `n` queued jobs with one in-process Worker; resolves when the last completion is recorded. */
async function drain(queueName: string, n: number, batchSize: number | undefined): Promise<void> {
  let completed = 0
  let done: () => void = () => {}
  const finished = new Promise<void>((resolve) => {
    done = resolve
  })
  const worker = new Worker(queueName, async () => {}, { connectionString: url, concurrency: 16, ...(batchSize ? { batchSize } : {}) })
  worker.on('completed', () => {
    if (++completed === n) done()
  })
  try {
    await within(finished, 300_000, `${n} completions`)
  } finally {
    await worker.close()
  }
}

const results: Measured[] = []
try {
  await migrate({ connectionString: url })
  const pool = new pg.Pool({ connectionString: url, max: 16 })
  const queue = (name: string) => new Queue<{ i: number }>(name, { pool, migrate: false })
  const adds = queue('adds')
  await runProducers(200, 16, (i) => adds.add('job', { i }).then(() => {}))
  results.push(await measure('add, sequential (W1)', 2000, () => runProducers(2000, 1, (i) => adds.add('job', { i }).then(() => {}))))
  results.push(await measure('add, 16 producers (W2)', 5000, () => runProducers(5000, 16, (i) => adds.add('job', { i }).then(() => {}))))
  const bulk = queue('bulk')
  results.push(await measure('addBulk of 1,000 (W3), per job', 20_000, () =>
    runProducers(20, 1, (b) => bulk.addBulk(payloads(b * 1000, 1000).map((data) => ({ name: 'job', data }))).then(() => {}))))
  const dedup = queue('dedup')
  await dedup.add('job', { i: 0 }, { deduplication: { id: 'held', ttl: 3_600_000 } })
  results.push(await measure('duplicate add, key held (W7)', 2000, () =>
    runProducers(2000, 1, (i) => dedup.add('job', { i }, { deduplication: { id: 'held', ttl: 3_600_000 } }).then(() => {}))))
  for (const batchSize of [undefined, 16]) {
    const name = `drain-${batchSize ?? 'default'}`
    const q = queue(name)
    for (let b = 0; b < 20; b++) await q.addBulk(payloads(b * 1000, 1000).map((data) => ({ name: 'job', data })))
    results.push(await measure(`Worker drains 20,000, concurrency 16, batchSize ${batchSize ?? 'default'} (W4), per job`, 20_000, () => drain(name, 20_000, batchSize)))
  }
  await pool.end()

  const pgbench = findPgbench()
  const ceilings: [string, number | string][] = []
  if (pgbench) {
    const setup = readFileSync(fileURLToPath(new URL('./pgbench/setup.sql', import.meta.url)), 'utf8')
    await admin.query(setup)
    const seconds = Number(process.env.BENCH_PGBENCH_SECONDS ?? 5)
    // queue.add's statement for a plain job, as pgbench sends it (no $n parameters; 'pgbench' has due work after the
    // first call, so this is the busy path: the bare INSERT). Written from sql/add-plain-job.sql at run time, while
    // that file exists (pgonce's SQL is being restructured: a missing file or function skips its row, with the reason).
    const plainAdd = join(tmpdir(), `pgonce-add-plain-job-${process.pid}.sql`)
    const literals = ["'pgbench'", "'job'", `'{"i": 1}'`, 'null', 'null', 'null']
    let plainAddMissing: string | null = null
    try {
      writeFileSync(plainAdd, `${sqlFor('add-plain-job', 'pgonce').replace(/^\s*--.*$/gm, '').replace(/\$(\d)/g, (_, n: string) => literals[Number(n) - 1] ?? 'null').trim()};\n`)
    } catch (err) {
      plainAddMissing = (err as Error).message.split('\n')[0] ?? 'unavailable'
    }
    const runs: [string, string, number, number][] = [
      ['plain INSERT, 1 client', 'single-insert', 1, 1],
      ['1-row INSERT into pgonce.jobs, 1 client', 'jobs-single-insert', 1, 1],
      // Prepared, as pgonce sends it: planned once per connection (pgbench's simple protocol would plan it per call).
      ["queue.add's statement for a plain job (sql/add-plain-job.sql, prepared), 1 client", plainAdd, 1, 1],
      ['add_job(), 1 client', 'add-job', 1, 1],
      ['plain INSERT, 16 clients', 'single-insert', 16, 1],
      ['add_job(), 16 clients', 'add-job', 16, 1],
      ['plain INSERT + pg_notify, 16 clients', 'single-insert-notify', 16, 1],
      ['add_job() of a delayed job (always NOTIFYs), 16 clients', 'add-job-delayed', 16, 1],
      ['add_job(), key held (duplicate), 1 client', 'add-job-duplicate', 1, 1],
      ['1,000-row INSERT, 1 client (rows/s)', 'multi-insert', 1, 1000],
      ['1,000-row INSERT into pgonce.jobs, 1 client (rows/s)', 'jobs-multi-insert', 1, 1000],
      ['add_plain_jobs() of 1,000, 1 client (rows/s)', 'add-plain-jobs-bulk', 1, 1000],
      ['add_jobs() of 1,000, 1 client (rows/s)', 'add-jobs-bulk', 1, 1000],
    ]
    try {
      for (const [label, script, clients, rows] of runs) {
        if (script === plainAdd && plainAddMissing) {
          ceilings.push([label, `skipped: ${plainAddMissing}`])
          continue
        }
        try {
          const rate = (await tps(pgbench, url, script, clients, seconds, script === plainAdd)) * rows
          ceilings.push([label, rate])
          log(`${label}: ${Math.round(rate)}/s`)
        } catch (err) {
          ceilings.push([label, `failed: ${(err as Error).message.split('\n').find((l) => /ERROR/.test(l)) ?? (err as Error).message.split('\n')[0]}`])
        }
      }
    } finally {
      rmSync(plainAdd, { force: true })
    }
  }

  const out: string[] = ['| pgonce operation | per s | round trips | WAL bytes | statements per op |', '| --- | --- | --- | --- | --- |']
  for (const r of results) {
    const shown = r.statements.filter(([, n]) => n >= 0.001)
    const rest = r.statements.filter(([, n]) => n < 0.001).reduce((sum, [, n]) => sum + n, 0)
    const statements = [
      ...shown.map(([kind, n]) => `${n.toFixed(n < 0.1 ? 4 : 2)} × \`${kind.replace(/\|/g, '\\|')}\``),
      ...(rest > 0 ? [`${rest.toFixed(4)} × start-up and housekeeping statements`] : []),
    ].join('<br>')
    out.push(`| ${r.label} | ${Math.round(r.perSecond).toLocaleString('en-US')} | ${r.roundTripsPerOp.toFixed(3)} | ${Math.round(r.walBytesPerOp)} | ${statements} |`)
  }
  if (ceilings.length) {
    out.push('', '| server side, pgbench | per s |', '| --- | --- |')
    for (const [label, rate] of ceilings) out.push(`| ${label} | ${typeof rate === 'number' ? Math.round(rate).toLocaleString('en-US') : rate} |`)
  } else {
    out.push('', 'pgbench not found: server-side ceilings not measured.')
  }
  process.stdout.write(`${out.join('\n')}\n`)
} finally {
  await admin.end()
  await dropDatabase(server.url, database)
  await server.stop()
}
