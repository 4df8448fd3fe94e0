// How a command reaches its schema: URL and schema checked before any I/O, a pool with a connect timeout, the schema
// checked to be migrated (the CLI never creates one: Queues get `migrate: false`), database errors as one line. pg and
// Queue are imported when a command connects: usage errors and --help start faster without them.

import type { Command } from 'commander'
import type pg from 'pg'
import { DEFAULT_SCHEMA, checkSchema } from '../db/identifiers.js'
import { fillPlaceholders } from '../db/sql-files.js'
import { ValidationError } from '../errors.js'
import type { Queue } from '../queue.js'
import { committedMigrations } from '../migrate/migrations.js'
import { jsonOption, queueOption } from './args.js'
import { CliError, failure, usage } from './output.js'

/** The program's own options, given before or after the command. */
export interface GlobalOptions {
  databaseUrl?: string
  schema: string
  connectTimeout: number
}

export interface Db {
  readonly schema: string
  readonly pool: pg.Pool
  /** The Queue of that name on the CLI's pool, with `migrate: false`. */
  queue(name: string): Queue
  /** A read-only statement on the views: `:PGONCE_SCHEMA` is the allow-listed schema, every value is bound. */
  query<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<R[]>
}

/** The `--schema` of a command, checked. */
export function schemaOf(cmd: Command): string {
  const { schema } = cmd.optsWithGlobals<GlobalOptions>()
  try {
    return checkSchema(schema)
  } catch (err) {
    throw err instanceof ValidationError ? usage(`--schema ${err.message.slice(err.field.length + 2)}`) : err
  }
}

/** The URL, checked enough that pg will not read it as something else, and the `host:port` errors name. */
function checkUrl(url: string | undefined): string {
  if (url === undefined || url === '') throw usage('no database: give --database-url <url> or set DATABASE_URL')
  const bad = usage('bad database URL: expected postgres://user:password@host:port/database')
  let parsed: URL
  try {
    parsed = new URL(url)
    for (const part of [parsed.username, parsed.password, parsed.pathname]) decodeURIComponent(part)
  } catch {
    throw bad
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') throw bad
  return `${parsed.searchParams.get('host') ?? (parsed.hostname || 'localhost')}:${parsed.port || '5432'}`
}

const CONNECT_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'connection refused (is PostgreSQL running there?)',
  ENOTFOUND: 'unknown host',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'timed out',
  ECONNRESET: 'connection reset',
  ENOENT: 'no such socket',
}

/** A database or network error as one line naming the server (never the URL: it may hold a password). */
function describe(
  err: unknown,
  target: string,
  timeoutS: number,
  answerS: number,
  DatabaseError: typeof pg.DatabaseError,
): unknown {
  if (err instanceof CliError || err instanceof ValidationError) return err
  const e = err as { code?: string; message?: string }
  const reason = e.code === undefined ? undefined : CONNECT_ERRORS[e.code]
  if (reason !== undefined) return failure(`cannot connect to ${target}: ${reason}`)
  if (/connection timeout|timeout expired/i.test(e.message ?? ''))
    return failure(`cannot connect to ${target}: no answer within ${timeoutS} s`)
  if (/query read timeout/i.test(e.message ?? '')) return failure(`${target}: no answer within ${answerS} s`)
  if (/connection terminated/i.test(e.message ?? '')) return failure(`lost the connection to ${target}: ${e.message}`)
  if (err instanceof DatabaseError) return failure(`${target}: ${err.message}`)
  return err
}

async function checkMigrated(pool: pg.Pool, schema: string): Promise<void> {
  const hint = `run \`pgonce migrate${schema === DEFAULT_SCHEMA ? '' : ` --schema ${schema}`}\``
  const {
    rows: [found],
  } = await pool.query<{ present: boolean; tracked: boolean }>(
    'select exists (select 1 from pg_namespace where nspname = $1) as present, to_regclass($2) is not null as tracked',
    [schema, `"${schema}".migrations`],
  )
  if (found?.present !== true) throw failure(`schema ${schema} does not exist: ${hint}`)
  if (found.tracked !== true) throw failure(`schema ${schema} holds no pgonce tables: ${hint}`)
  const { rows } = await pool.query<{ filename: string }>(
    fillPlaceholders('select filename from :PGONCE_SCHEMA.migrations', schema),
  )
  const applied = new Set(rows.map((r) => r.filename))
  const missing = committedMigrations().filter((m) => !applied.has(m.filename)).length
  if (missing > 0)
    throw failure(
      `schema ${schema} is not up to date (${missing} migration${missing === 1 ? '' : 's'} to apply): ${hint}`,
    )
}

/**
 * Runs `fn` on the schema of `cmd`'s options, then ends the pool. Unless `migrated: false` (for `migrate` itself),
 * the schema must exist and be up to date.
 */
export async function withDb<T>(
  cmd: Command,
  fn: (db: Db) => Promise<T>,
  options: { migrated?: boolean } = {},
): Promise<T> {
  const globals = cmd.optsWithGlobals<GlobalOptions>()
  const schema = schemaOf(cmd)
  const target = checkUrl(globals.databaseUrl)
  const [{ default: driver }, { Queue }, bounds] = await Promise.all([
    import('pg'),
    import('../queue.js'),
    import('../db/connection.js'),
  ])
  const answerMs = bounds.DEFAULT_STATEMENT_TIMEOUT_MS + bounds.ANSWER_GRACE_MS
  const pool = new driver.Pool({
    connectionString: globals.databaseUrl,
    max: 4,
    connectionTimeoutMillis: globals.connectTimeout * 1000,
    application_name: 'pgonce-cli',
    // Bounded like a Queue's own pool (docs/operations.md, "Bounded waits"): a server that stops answering fails the command.
    statement_timeout: bounds.DEFAULT_STATEMENT_TIMEOUT_MS,
    query_timeout: answerMs,
  })
  // An idle connection the server drops must not crash the CLI: the next statement reports it.
  pool.on('error', () => {})
  const queues = new Map<string, Queue>()
  const db: Db = {
    schema,
    pool,
    queue(name) {
      let queue = queues.get(name)
      if (queue === undefined) {
        queue = new Queue(name, { pool, schema, migrate: false })
        queues.set(name, queue)
      }
      return queue
    },
    async query<R extends pg.QueryResultRow>(text: string, values: unknown[]) {
      return (await pool.query<R>(fillPlaceholders(text, schema), values)).rows
    },
  }
  try {
    if (options.migrated !== false) await checkMigrated(pool, schema)
    return await fn(db)
  } catch (err) {
    throw describe(err, target, globals.connectTimeout, answerMs / 1000, driver.DatabaseError)
  } finally {
    await Promise.all([...queues.values()].map((q) => q.close()))
    await pool.end()
  }
}

export interface ItemOptions {
  queue: string
  json?: boolean
}

/** `<parent> <name> <ARG> --queue Q [--json]`: runs `run` with the Queue of Q, on a schema checked to be migrated. */
export function itemCommand(
  parent: Command,
  name: string,
  description: string,
  arg: { name: string; description: string; parse: (value: string) => string },
  run: (queue: Queue, value: string, opts: ItemOptions) => Promise<void>,
): void {
  parent
    .command(name)
    .description(description)
    .argument(`<${arg.name}>`, arg.description, arg.parse)
    .addOption(queueOption())
    .addOption(jsonOption())
    .action((value: string, opts: ItemOptions, cmd: Command) =>
      withDb(cmd, (db) => run(db.queue(opts.queue), value, opts)),
    )
}
