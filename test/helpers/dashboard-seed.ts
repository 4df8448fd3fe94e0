// Seeds many jobs fast for the dashboard's scale checks (test/dashboard.scale.test.ts, bench/dashboard-scale.ts): one
// INSERT … SELECT generate_series per state, as a worker would have left the rows, then VACUUM ANALYZE (the statistics
// and visibility map a live table has from autovacuum).

import type pg from 'pg'

export interface SeedPlan {
  queue: string
  completed: number
  failed?: number
  waiting?: number
  delayed?: number
  /** Completed and failed jobs finished evenly over this many ms before now. (Default: 24 hours, the retention) */
  spreadMs?: number
}

export async function seedJobs(pool: pg.Pool, schema: string, plan: SeedPlan): Promise<void> {
  const s = `"${schema}"`
  const spread = plan.spreadMs ?? 86_400_000
  const finished = async (state: 'completed' | 'failed', n: number) => {
    if (n === 0) return
    await pool.query(
      `insert into ${s}.jobs (queue, name, data, state, attempts, created_at, started_at, finished_at, last_error, result)
       select $1, 'seeded', jsonb_build_object('n', g, 'customer', g % 1000), $2, 1,
              now() - make_interval(secs => ($4::float8 * (1 - g::float8 / $3)) / 1000) - interval '1 second',
              now() - make_interval(secs => ($4::float8 * (1 - g::float8 / $3)) / 1000) - interval '500 ms',
              now() - make_interval(secs => ($4::float8 * (1 - g::float8 / $3)) / 1000),
              case when $2 = 'failed' then 'error ' || (g % 7) end,
              case when $2 = 'completed' then '{"ok":true}'::jsonb end
       from generate_series(1, $3::integer) g`,
      [plan.queue, state, n, spread],
    )
  }
  await finished('completed', plan.completed)
  await finished('failed', plan.failed ?? 0)
  if ((plan.waiting ?? 0) > 0) {
    await pool.query(
      `insert into ${s}.jobs (queue, name, data) select $1, 'seeded', jsonb_build_object('n', g) from generate_series(1, $2::integer) g`,
      [plan.queue, plan.waiting],
    )
  }
  if ((plan.delayed ?? 0) > 0) {
    await pool.query(
      `insert into ${s}.jobs (queue, name, data, state, run_at)
       select $1, 'seeded', jsonb_build_object('n', g), 'delayed', now() + make_interval(secs => 3600 + g)
       from generate_series(1, $2::integer) g`,
      [plan.queue, plan.delayed],
    )
  }
  await pool.query(`vacuum analyze ${s}.jobs`)
}
