// A drain beside housekeeping that works off a backlog (completed jobs finished 1 to 4 hours ago, retention 30 min):
// jobs/s of a 50,000-job drain (Worker, concurrency 16) with no pruner, beside back-to-back runMaintenance calls
// (what a cron loop does, and what a Worker's housekeeping did before it was paced), and beside a second Worker whose
// own housekeeping prunes (paced: maintenance.ts, RoundSettings);
// then how long that Worker's close() takes in the middle of its round. Rounds alternate the three.
//
//   npx tsx bench/housekeeping.ts      (ROWS=2000000, JOBS=50000, ROUNDS=3 by default)
//
// Uses DATABASE_URL (a database of its own, dropped at the end). Results: bench/README.md, "Pruning beside a drain".

import pg from 'pg'
import { Worker, runMaintenance } from '../src/index.js'
import { BenchDatabase, SCHEMA, drain, enqueue, loadHistory, log, sleep, spread } from './history-db.js'

const ROWS = Number(process.env.ROWS ?? 2_000_000)
const JOBS = Number(process.env.JOBS ?? 50_000)
const ROUNDS = Number(process.env.ROUNDS ?? 3)
const QUEUES = Array.from({ length: 10 }, (_, i) => `history-${i}`)
type Pruner = 'none' | 'back-to-back runMaintenance' | "a Worker's housekeeping"
const PRUNERS: Pruner[] = ['none', 'back-to-back runMaintenance', "a Worker's housekeeping"]

const url = process.env.DATABASE_URL
if (!url) throw new Error('DATABASE_URL must name the server')
const db = await BenchDatabase.create(url, 'pgonce_bench_housekeeping')
const history = async (): Promise<number> => (await db.query<{ n: number }>(
  `select count(*)::int as n from ${SCHEMA}.jobs where queue = any($1::text[])`, [QUEUES]))[0]?.n ?? 0

/** Starts a pruner; its stop() resolves once it has stopped, with the ms that took. */
function startPruner(pruner: Pruner): { stop: () => Promise<number> } {
  if (pruner === 'none') return { stop: async () => 0 }
  if (pruner === "a Worker's housekeeping") {
    const keeper = new Worker('keeper', async () => {}, { connectionString: db.url, schema: SCHEMA, migrate: false })
    keeper.on('error', (err) => log(`keeper: ${err.message}`))
    return { stop: async () => { const t = performance.now(); await keeper.close(); return performance.now() - t } }
  }
  const pool = new pg.Pool({ connectionString: db.url, max: 1 })
  pool.on('error', () => {})
  let stopping = false
  const loop = (async () => {
    while (!stopping) await runMaintenance({ pool, schema: SCHEMA })
  })()
  return { stop: async () => { const t = performance.now(); stopping = true; await loop; await pool.end(); return performance.now() - t } }
}

const results = new Map<Pruner, { jobsPerSecond: number; prunedPerSecond: number; stopMs: number }[]>(PRUNERS.map((p) => [p, []]))
try {
  await loadHistory(db, ROWS, QUEUES)
  for (const queue of QUEUES) await db.queue(queue).setRetention({ completedMs: 30 * 60 * 1000 })
  await db.vacuumAnalyze()
  log(`${ROWS} prunable rows over ${QUEUES.length} queues`)
  for (let r = 0; r < ROUNDS; r++) {
    for (const pruner of r % 2 === 0 ? PRUNERS : [...PRUNERS].reverse()) {
      await enqueue(db, 'drain', JOBS)
      const running = startPruner(pruner)
      await sleep(500)
      const before = await history()
      const t = await drain(db, 'drain', JOBS, { maintenanceIntervalMs: 0 })
      const pruned = before - await history()
      const stopMs = await running.stop()
      if (await history() === 0) throw new Error('the backlog ran out: raise ROWS')
      const row = { jobsPerSecond: t.perSecond, prunedPerSecond: (pruned * 1000) / t.ms, stopMs }
      results.get(pruner)?.push(row)
      log(`round ${r + 1}, ${pruner}: ${Math.round(row.jobsPerSecond)} jobs/s, ${Math.round(row.prunedPerSecond)} rows/s pruned meanwhile, stopped in ${Math.round(stopMs)} ms`)
    }
  }
} finally {
  await db.close()
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US')
const cell = (values: number[]): string => { const s = spread(values); return `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})` }
const none = spread(results.get('none')?.map((x) => x.jobsPerSecond) ?? []).median
console.log(`| pruner (${ROUNDS} rounds, median and range) | drain jobs/s | ÷ no pruner | rows pruned/s during the drain | pruner stopped in (ms) |`)
console.log('| --- | --- | --- | --- | --- |')
for (const [pruner, rows] of results) {
  const jobs = rows.map((x) => x.jobsPerSecond)
  console.log(`| ${pruner} | ${cell(jobs)} | ${(spread(jobs).median / none).toFixed(2)}× | ${cell(rows.map((x) => x.prunedPerSecond))} | ${pruner === 'none' ? '—' : cell(rows.map((x) => x.stopMs))} |`)
}
