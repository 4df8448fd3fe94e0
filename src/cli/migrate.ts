// `pgonce migrate` (apply the migrations) and `pgonce sql` (print them, for a migration tool of your own).

import type { Command } from 'commander'
import { committedMigrations } from '../migrate/migrations.js'
import { fillPlaceholders } from '../db/sql-files.js'
import { jsonOption } from './args.js'
import { withDb, schemaOf } from './connect.js'
import { emit, usage } from './output.js'

function literal(value: string): string {
  return `'${value.replace(/'/g, "''")}'`
}

/**
 * Every committed migration after `since` (a filename or its number; none: all), placeholders filled for `schema`, each
 * followed by the row `migrate()` records for it in `<schema>.migrations`: applied to a database, `migrate()` finds
 * the schema up to date. No BEGIN/COMMIT: a migration tool has its own transaction.
 */
export function migrationSql(schema: string, since?: string): string {
  const all = committedMigrations()
  let start = 0
  if (since !== undefined) {
    const at = all.findIndex(
      (m) => m.filename === since || m.filename.startsWith(`${since}-`) || m.filename === `${since}.sql`,
    )
    if (at < 0)
      throw usage(`--since: no committed migration ${since} (known: ${all.map((m) => m.filename).join(', ')})`)
    start = at + 1
  }
  const parts = [
    `-- pgonce migrations for schema ${schema}${since === undefined ? '' : ` after ${all[start - 1]?.filename}`}.
-- Run them in one transaction (psql --single-transaction, or your migration tool); \`pgonce migrate\` then finds the
-- schema up to date. The lock is the one migrate() takes: an application migrating on first use waits for this.
select pg_advisory_xact_lock(hashtextextended(${literal(`pgonce.migrate:${schema}`)}, 0));`,
    fillPlaceholders(
      `create schema if not exists :PGONCE_SCHEMA;
create table if not exists :PGONCE_SCHEMA.migrations (
  filename text primary key, hash text not null, applied_at timestamptz not null default now());`,
      schema,
    ),
  ]
  for (const m of all.slice(start)) {
    parts.push(
      `-- ${m.filename}\n${fillPlaceholders(m.body, schema).trimEnd()}`,
      fillPlaceholders(
        `insert into :PGONCE_SCHEMA.migrations (filename, hash) values (${literal(m.filename)}, ${literal(m.hash)});`,
        schema,
      ),
    )
  }
  return `${parts.join('\n\n')}\n`
}

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('create or update the pgonce schema')
    .addOption(jsonOption())
    .action((opts: { json?: boolean }, cmd: Command) =>
      withDb(
        cmd,
        async (db) => {
          const { migrate } = await import('../migrate/runner.js')
          const { applied } = await migrate({ pool: db.pool, schema: db.schema })
          emit(opts.json, { schema: db.schema, applied }, () =>
            applied.length > 0 ? `applied ${applied.join(', ')}\n` : `schema ${db.schema} is up to date\n`,
          )
        },
        { migrated: false },
      ),
    )

  program
    .command('sql')
    .description('print the migration SQL, for a migration tool of your own (no database needed)')
    .option('--since <migration>', 'only the migrations after this one (its filename or number)')
    .action((opts: { since?: string }, cmd: Command) => {
      process.stdout.write(migrationSql(schemaOf(cmd), opts.since))
    })
}
