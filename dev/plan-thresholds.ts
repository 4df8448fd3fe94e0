// A lab probe, not a benchmark: from how many rows (as the last ANALYZE saw them) a session's generic plan of each
// lookup keeps its index, for a cost of _prefer_index() (migration 000018). For each COSTS entry and each ROWS size it
// fills a fresh schema's jobs and dedup_keys, analyses them, and EXPLAINs the generic plan of a completion (a list of
// ids), a failure (one id) and the two duplicate reads of sql/add-job.sql (a key, a jobId): SEQ or idx.
//
//   DATABASE_URL=… COSTS=1000,1 ROWS=2,4,8,20,100,1000,5000 npx tsx dev/plan-thresholds.ts
//
// COSTS=1 is about the statements without the qual. bench/README.md, "Plans made on a small table".

import pg from 'pg'
import { migrate } from '../src/index.js'
import { sqlFor } from '../src/db/sql-files.js'

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const list = (value: string | undefined, fallback: string) => (value ?? fallback).split(',').map(Number)
const schema = `probe_plans_${Math.random().toString(16).slice(2, 8)}`
await migrate({ connectionString: url, schema })
const client = new pg.Client({ connectionString: url })
await client.connect()
const token = "'00000000-0000-0000-0000-000000000001'"
const lookups: Array<[string, string, string]> = [
  ['completion', 'complete-jobs', `'{1}', '{${token.slice(1, -1)}}', '{null}'`],
  ['failure', 'fail-job', `'1', ${token}, 'e', 's', '0'`],
  ['duplicate key', 'add-job', "'t', 'n', '{}', null, 'k1', '1000', null, null, null, null, null, null, null, null"],
  ['duplicate jobId', 'add-job', "'t', 'n', '{}', 'j1', null, null, null, null, null, null, null, null, null, null"],
]
try {
  await client.query('set plan_cache_mode = force_generic_plan')
  for (const cost of list(process.env.COSTS, '1000,1')) {
    await client.query(`alter function "${schema}"._prefer_index(bigint) cost ${cost}`)
    for (const rows of list(process.env.ROWS, '2,4,8,14,20,42,100,400,1000,5000')) {
      await client.query(`truncate "${schema}".jobs cascade`)
      await client.query(`insert into "${schema}".jobs (queue, name, data, job_id)
        select 't', 'n', '{}', 'j' || g from generate_series(1, $1) g`, [rows])
      await client.query(`insert into "${schema}".dedup_keys (queue, key, job_id) select 't', 'k' || id, id from "${schema}".jobs`)
      await client.query(`analyze "${schema}".jobs, "${schema}".dedup_keys`)
      const seen: string[] = []
      for (const [label, file, args] of lookups) {
        await client.query('deallocate all')
        await client.query(`prepare lookup as ${sqlFor(file, schema)}`)
        const { rows: plan } = await client.query<{ 'QUERY PLAN': string }>(`explain execute lookup(${args})`)
        seen.push(`${label} ${plan.some((r) => /Seq Scan on (jobs|dedup_keys)/.test(r['QUERY PLAN'])) ? 'SEQ' : 'idx'}`)
      }
      console.log(`cost ${cost}, ${rows} rows: ${seen.join(', ')}`)
    }
  }
} finally {
  await client.query(`drop schema "${schema}" cascade`)
  await client.end()
}
