// A lab probe, not a benchmark: how fast housekeeping prunes completed jobs past their retention. N completed plain jobs
// (finished two days ago) on a fresh schema, vacuumed and analysed, then runMaintenance() back to back until nothing
// is left; prints rows pruned per second.
//
//   DATABASE_URL=… N=200000 npx tsx dev/prune-probe.ts
//   DROP_FKS=1  drops the three foreign keys to jobs first (dedup_keys, job_dependencies): what their ON DELETE CASCADE
//               triggers cost each pruned row (a diagnosis: without them nothing removes a deleted job's keys and edges)
//
// bench/README.md, "What deleting a job costs".

import pg from 'pg'
import { migrate, runMaintenance } from '../src/index.js'
import { dropJobForeignKeys } from './probe-database.js'

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const N = Number(process.env.N ?? 200_000)
const schema = `probe_prune_${Math.random().toString(16).slice(2, 8)}`
await migrate({ connectionString: url, schema })
const pool = new pg.Pool({ connectionString: url, max: 2 })
try {
  if (process.env.DROP_FKS) await dropJobForeignKeys(pool, schema)
  await pool.query(`insert into "${schema}".jobs (queue, name, data, state, finished_at)
    select 'p', 'n', '{}', 'completed', now() - interval '2 days' from generate_series(1, $1)`, [N])
  await pool.query(`vacuum analyze "${schema}".jobs`)
  await pool.query('checkpoint')
  const started = performance.now()
  for (;;) {
    const { pruned } = await runMaintenance({ pool, schema })
    if (pruned === 0) break
  }
  const left = (await pool.query<{ n: number }>(`select count(*)::int as n from "${schema}".jobs`)).rows[0]?.n
  console.log(`${process.env.DROP_FKS ? 'without the foreign keys' : 'as migrated'}: ${Math.round(N / (performance.now() - started) * 1000)} rows/s pruned, ${left} left`)
} finally {
  await pool.query(`drop schema "${schema}" cascade`)
  await pool.end()
}
