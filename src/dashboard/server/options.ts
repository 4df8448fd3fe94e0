// The options of dashboard(), checked before any I/O (a ValidationError naming the field).

import type { IncomingMessage } from 'node:http'
import type pg from 'pg'
import { checkSchema } from '../../db/identifiers.js'
import { type Logger, checkLogger } from '../../logger.js'
import { checkBoolean, checkInteger, checkOptions, fail } from '../../validate.js'

/** What a dashboard user can do besides reading. */
export const DASHBOARD_ACTIONS = [
  'retry',
  'cancel',
  'remove',
  'promote',
  'pause',
  'resume',
  'removeKey',
  'runScheduler',
] as const
export type DashboardAction = (typeof DASHBOARD_ACTIONS)[number]

/** The request `can` is asked about: node's IncomingMessage through the handler, a Fetch Request through `.fetch`. */
export type DashboardRequest = IncomingMessage | Request

export interface DashboardOptions {
  /** A libpq connection string: the dashboard opens one small pool of its own (ended by `close()`). */
  connectionString?: string
  /** Your `pg.Pool` instead (never ended by the dashboard); every read still runs under `statementTimeoutMs`. */
  pool?: pg.Pool
  /** The schema holding pgonce's tables. (Default: 'pgonce') */
  schema?: string
  /** Where the dashboard is mounted, e.g. '/queues': the UI's `<base href>` and the prefix stripped from paths. (Default: '/') */
  basePath?: string
  /** Refuse every action (403 READ_ONLY). `false` allows them all, unless `can` says otherwise. (Default: true, or false when `can` is given) */
  readOnly?: boolean
  /** Decides each action per request (true: allowed); given alone, it turns actions on. */
  can?: (action: DashboardAction, req: DashboardRequest) => boolean | Promise<boolean>
  /** The server's statement_timeout for every statement of the dashboard, in ms. (Default: 5000) */
  statementTimeoutMs?: number
  /** How long to wait for a connection, in ms. Not with `pool`. (Default: 5000) */
  connectTimeoutMs?: number
  /** A pino-compatible logger for errors the API answers with 500. (Default: silent) */
  logger?: Logger
}

export const DASHBOARD_OPTION_KEYS = [
  'connectionString',
  'pool',
  'schema',
  'basePath',
  'readOnly',
  'can',
  'statementTimeoutMs',
  'connectTimeoutMs',
  'logger',
] as const

export interface ResolvedOptions {
  connectionString: string | undefined
  pool: pg.Pool | undefined
  schema: string
  /** Without its trailing slash: '' for the root. */
  basePath: string
  readOnly: boolean
  can: DashboardOptions['can']
  statementTimeoutMs: number
  connectTimeoutMs: number
  logger: Logger
}

// What a path may hold without escaping (RFC 3986's pchar and '/'), and no '..' segment or '//'.
const BASE_PATH = /^(\/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)*\/?$/

/** Checks `basePath`: absolute, no query, no dot segment; returned without its trailing slash. */
export function checkBasePath(value: unknown, field = 'options.basePath'): string {
  if (value === undefined) return ''
  if (
    typeof value !== 'string' ||
    value.length > 200 ||
    !BASE_PATH.test(value) ||
    value.split('/').some((s) => s === '.' || s === '..')
  ) {
    fail(
      'INVALID_TYPE',
      field,
      "must be an absolute path like '/' or '/queues' (letters, digits and -._~ and the like)",
    )
  }
  return value.replace(/\/$/, '')
}

export function resolveOptions(options: unknown): ResolvedOptions {
  const o = checkOptions<DashboardOptions>(options, 'options', DASHBOARD_OPTION_KEYS)
  if ((o.connectionString === undefined) === (o.pool === undefined)) {
    fail('CONFLICTING_OPTIONS', 'options.connectionString', 'give exactly one of connectionString and pool')
  }
  if (o.connectionString !== undefined && (typeof o.connectionString !== 'string' || o.connectionString === '')) {
    fail('INVALID_TYPE', 'options.connectionString', 'must be a non-empty string')
  }
  if (o.pool !== undefined && (typeof o.pool !== 'object' || o.pool === null || typeof o.pool.connect !== 'function')) {
    fail('INVALID_TYPE', 'options.pool', 'must be a pg.Pool')
  }
  if (o.pool !== undefined && o.connectTimeoutMs !== undefined) {
    fail('CONFLICTING_OPTIONS', 'options.connectTimeoutMs', 'applies to the pool the dashboard opens')
  }
  if (o.can !== undefined && typeof o.can !== 'function') fail('INVALID_TYPE', 'options.can', 'must be a function')
  const readOnlyGiven = o.readOnly === undefined ? undefined : checkBoolean(o.readOnly, 'options.readOnly')
  if (readOnlyGiven === true && o.can !== undefined) {
    fail(
      'CONFLICTING_OPTIONS',
      'options.can',
      'readOnly: true refuses every action: give readOnly: false or leave it out',
    )
  }
  return {
    connectionString: o.connectionString,
    pool: o.pool,
    schema: checkSchema(o.schema, 'options.schema'),
    basePath: checkBasePath(o.basePath),
    readOnly: readOnlyGiven ?? o.can === undefined,
    can: o.can,
    statementTimeoutMs:
      o.statementTimeoutMs === undefined
        ? 5_000
        : checkInteger(o.statementTimeoutMs, 'options.statementTimeoutMs', 1, 600_000),
    connectTimeoutMs:
      o.connectTimeoutMs === undefined
        ? 5_000
        : checkInteger(o.connectTimeoutMs, 'options.connectTimeoutMs', 1, 600_000),
    logger: checkLogger(o.logger, 'options.logger'),
  }
}
