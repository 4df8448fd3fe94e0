// W5 with jobIds instead of keys: 10,000 `queue.add` calls over 1,000 jobIds from 16 producers (the first add of each
// jobId adds, the other nine answer 'duplicate-job-id' with the live generation), after 2,000 untimed; prints adds/s.
// For before/after checks of sql/add-job.sql's in-statement answers (bench/README.md, "Duplicates answered in the
// statement"); run it in two checkouts alternately.
//
//   DATABASE_URL=… npx tsx bench/jobid-duplicates.ts

import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { Queue, migrate } from '../src/index.js'
import { runProducers } from './measure.js'

const url = process.env.DATABASE_URL
if (!url) throw new Error('DATABASE_URL must name the server')
const schema = `bench_jobid_${randomBytes(3).toString('hex')}`
await migrate({ connectionString: url, schema })
const pool = new pg.Pool({ connectionString: url, max: 16 })
const queue = new Queue('jobid-duplicates', { pool, schema, migrate: false })
try {
  await runProducers(2_000, 16, async (i) => {
    await queue.add('warm-up', { i }, { jobId: `warm-${i % 100}` })
  })
  const ms = await runProducers(10_000, 16, async (i) => {
    await queue.add('n', { i }, { jobId: `id-${i % 1000}` })
  })
  console.log(`${Math.round((10_000 * 1000) / ms)} adds/s`)
} finally {
  await queue.close()
  await pool.query(`drop schema "${schema}" cascade`)
  await pool.end()
}
