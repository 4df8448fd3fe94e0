// Shared by the fault suite: child processes (worker fixtures, CPU load), free ports, extra PostgreSQL clusters and a
// PgBouncer of the test's own. Everything started here is stopped by the returned handle; call it in afterAll.

import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync, chmodSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import pg from 'pg'

export { waitFor, exited } from '../fixtures/worker-helpers.js'

const execFileAsync = promisify(execFile)
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')

export type Child = ChildProcess & {
  /** Everything the child wrote so far (stdout and stderr). */
  output: () => string
  /** The JSON lines the child wrote on stdout, parsed. */
  messages: () => Record<string, unknown>[]
}

/** Starts `test/fixtures/<script>` as `node --import tsx <script>` from the repo root. */
export function spawnFixture(script: string, env: Record<string, string>): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'test', 'fixtures', script)], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let stdout = ''
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString()
    stdout += c.toString()
  })
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()))
  const messages = (): Record<string, unknown>[] => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => {
    try {
      return JSON.parse(l) as Record<string, unknown>
    } catch {
      return {}
    }
  })
  return Object.assign(child, { output: () => out, messages })
}

/** True while the child runs (no exit code, no signal). */
export function alive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null
}

/**
 * Why a worker child is not fine: it exited (code or signal) or reported a crash (uncaught exception or unhandled
 * rejection); null while it runs untouched.
 */
export function notSurviving(child: Child): string | null {
  if (!alive(child)) return `exited with ${child.exitCode ?? child.signalCode}\n${child.output().slice(-2_000)}`
  const crash = child.messages().find((m) => 'crash' in m)
  return crash === undefined ? null : `reported ${JSON.stringify(crash)}`
}

/** Busy-loops `n` child processes (CPU load on the test's cores); returns a stop function. */
export function cpuLoad(n: number): () => void {
  const kids = Array.from({ length: n }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }))
  return () => {
    for (const k of kids) k.kill('SIGKILL')
  }
}

/** A TCP port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolvePort(port))
    })
  })
}

/** Resolves once something accepts TCP connections on `port`, or throws after `timeoutMs`. */
async function portOpen(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const ok = await new Promise<boolean>((r) => {
      const s = connect(port, '127.0.0.1')
      s.once('connect', () => (s.destroy(), r(true)))
      s.once('error', () => r(false))
    })
    if (ok) return
    if (Date.now() > deadline) throw new Error(`nothing listens on port ${port} after ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

async function onPath(command: string): Promise<string | null> {
  try {
    const { stdout } = await execFileAsync('sh', ['-c', `command -v ${command}`])
    return stdout.trim() || null
  } catch {
    return null
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Extra PostgreSQL clusters (Debian's postgresql-common), for the tests that restart a server.

export interface Cluster {
  name: string
  port: number
  /** Connection string of the cluster's `postgres` database. */
  url: string
  /** `pg_ctlcluster 15 NAME restart -m immediate` (a crash and recovery). */
  restartImmediate(): Promise<void>
  /** Stops and drops the cluster (idempotent). */
  drop(): Promise<void>
}

/** Why no cluster of the test's own can be made here, or null if one can (pg_createcluster as root or postgres). */
export async function clusterUnavailable(): Promise<string | null> {
  if ((await onPath('pg_createcluster')) === null) return 'pg_createcluster is not installed (e.g. the embedded server is in use)'
  if ((await onPath('pg_ctlcluster')) === null) return 'pg_ctlcluster is not installed'
  const uid = process.getuid?.()
  if (uid !== 0) {
    const { stdout } = await execFileAsync('id', ['-un']).catch(() => ({ stdout: '' }))
    if (stdout.trim() !== 'postgres') return 'pg_createcluster needs root or the postgres user'
  }
  return null
}

/** Creates and starts cluster 15/`name` on a free port with trust authentication. */
export async function createCluster(label: string): Promise<Cluster> {
  const name = `${label}${process.pid}${Math.floor(Math.random() * 1e4)}`
  const port = await freePort()
  await execFileAsync('pg_createcluster', ['15', name, '--port', String(port), '--start',
    '-o', 'fsync=off', '-o', 'max_connections=200', '--', '--auth=trust'], { timeout: 60_000 })
  let dropped = false
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`
  await portOpen(port, 20_000)
  return {
    name,
    port,
    url,
    async restartImmediate() {
      await execFileAsync('pg_ctlcluster', ['15', name, 'restart', '-m', 'immediate'], { timeout: 60_000 })
    },
    async drop() {
      if (dropped) return
      dropped = true
      await execFileAsync('pg_dropcluster', ['15', name, '--stop'], { timeout: 60_000 }).catch(async () => {
        await execFileAsync('pg_ctlcluster', ['15', name, 'stop', '-m', 'immediate']).catch(() => {})
        await execFileAsync('pg_dropcluster', ['15', name]).catch(() => {})
      })
    },
  }
}

// ---------------------------------------------------------------------------------------------------------------
// PgBouncer in transaction mode, in a temp directory of its own.

export interface Bouncer {
  port: number
  /** Connection string through the bouncer to database `database` of the target. */
  url: string
  stop(): Promise<void>
}

export const PGBOUNCER_INSTALL_HINT = 'install it with `apt-get install -y pgbouncer` (run `apt-get update` first if needed)'

/** The pgbouncer binary, or null when it is not installed. */
export async function pgbouncerBinary(): Promise<string | null> {
  for (const candidate of ['pgbouncer', '/usr/sbin/pgbouncer', '/usr/bin/pgbouncer']) {
    const found = await onPath(candidate)
    if (found !== null) return found
  }
  return null
}

/**
 * Starts pgbouncer (pool_mode = transaction, trust) in front of `target` (a postgres:// URL); `poolSize` server
 * connections per database. `ignored`: its ignore_startup_parameters (`options` carries pgonce's statementTimeoutMs).
 */
export async function startPgbouncer(binary: string, target: string, poolSize: number, ignored = 'extra_float_digits,options'): Promise<Bouncer> {
  const t = new URL(target)
  const database = decodeURIComponent(t.pathname.slice(1)) || 'postgres'
  const user = decodeURIComponent(t.username) || 'postgres'
  const dir = mkdtempSync(join(tmpdir(), 'pgonce-pgbouncer-'))
  const port = await freePort()
  // Clients log in to the bouncer by trust; the bouncer logs in to the server with the auth file's password, the
  // target's if it has one (the embedded server of a machine without PostgreSQL asks for one). The file doubles quotes.
  const password = decodeURIComponent(t.password).replaceAll('"', '""')
  writeFileSync(join(dir, 'users.txt'), `"${user}" "${password}"\n`)
  writeFileSync(join(dir, 'pgbouncer.ini'), [
    '[databases]',
    `${database} = host=${t.hostname} port=${t.port || 5432} dbname=${database}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${join(dir, 'users.txt')}`,
    'pool_mode = transaction',
    `default_pool_size = ${poolSize}`,
    'max_client_conn = 500',
    'server_reset_query =',
    `ignore_startup_parameters = ${ignored}`,
    '',
  ].join('\n'))
  chmodSync(dir, 0o755)
  // PgBouncer refuses to run as root: -u switches to the postgres user.
  const args = process.getuid?.() === 0 ? ['-u', 'postgres', join(dir, 'pgbouncer.ini')] : [join(dir, 'pgbouncer.ini')]
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let log = ''
  child.stdout?.on('data', (c: Buffer) => (log += c.toString()))
  child.stderr?.on('data', (c: Buffer) => (log += c.toString()))
  try {
    await portOpen(port, 10_000)
  } catch (err) {
    child.kill('SIGKILL')
    throw new Error(`pgbouncer did not start: ${(err as Error).message}\n${log}`)
  }
  const url = `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${encodeURIComponent(database)}`
  return {
    port,
    url,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const gone = new Promise((r) => child.once('exit', r))
        child.kill('SIGTERM')
        await Promise.race([gone, new Promise((r) => setTimeout(r, 3_000))])
        child.kill('SIGKILL')
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

// ---------------------------------------------------------------------------------------------------------------

/** A pg.Client of the test's own, connected; `release(client)` rolls back whatever it left open and ends it. */
export async function connectClient(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  return client
}

export async function releaseClient(client: pg.Client | undefined): Promise<void> {
  await client?.query('rollback').catch(() => {})
  await client?.end()
}

/** The backend pid of a connected pg.Client. */
export const backendPid = (client: pg.Client): number => (client as unknown as { processID: number }).processID

/** The database clock, now. */
export async function dbNow(pool: pg.Pool): Promise<Date> {
  return (await pool.query<{ now: Date }>('select clock_timestamp() as now')).rows[0]!.now
}

/** Terminates backend `pid`; true if the server found it. */
export async function terminate(pool: pg.Pool, pid: number): Promise<boolean> {
  return (await pool.query<{ ok: boolean }>('select pg_terminate_backend($1) as ok', [pid])).rows[0]!.ok
}
