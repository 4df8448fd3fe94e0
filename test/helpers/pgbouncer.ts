// PgBouncer in transaction mode, in a temp directory of its own, in front of a server the test names.

import { spawn } from 'node:child_process'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, waitForPort } from './ports.js'
import { commandPath } from './processes.js'

export interface Bouncer {
  port: number
  /** Connection string through the bouncer to database `database` of the target. */
  url: string
  stop(): Promise<void>
}

export const PGBOUNCER_INSTALL_HINT =
  'install it with `apt-get install -y pgbouncer` (run `apt-get update` first if needed)'

/** The pgbouncer binary, or null when it is not installed. */
export async function pgbouncerBinary(): Promise<string | null> {
  for (const candidate of ['pgbouncer', '/usr/sbin/pgbouncer', '/usr/bin/pgbouncer']) {
    const found = await commandPath(candidate)
    if (found !== null) return found
  }
  return null
}

/**
 * Starts pgbouncer (pool_mode = transaction, trust) in front of `target` (a postgres:// URL); `poolSize` server
 * connections per database. `ignored`: its ignore_startup_parameters (`options` carries pgonce's statementTimeoutMs).
 * `listenAddr`: the address it listens on (the bed's gateway, for hosts in network namespaces).
 */
export async function startPgbouncer(
  binary: string,
  target: string,
  poolSize: number,
  ignored = 'extra_float_digits,options',
  listenAddr = '127.0.0.1',
): Promise<Bouncer> {
  const t = new URL(target)
  const database = decodeURIComponent(t.pathname.slice(1)) || 'postgres'
  const user = decodeURIComponent(t.username) || 'postgres'
  const dir = mkdtempSync(join(tmpdir(), 'pgonce-pgbouncer-'))
  const port = await freePort()
  // Clients log in to the bouncer by trust; the bouncer logs in to the server with the auth file's password, the
  // target's if it has one (the embedded server of a machine without PostgreSQL asks for one). The file doubles quotes.
  const password = decodeURIComponent(t.password).replaceAll('"', '""')
  writeFileSync(join(dir, 'users.txt'), `"${user}" "${password}"\n`)
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `${database} = host=${t.hostname} port=${t.port || 5432} dbname=${database}`,
      '[pgbouncer]',
      `listen_addr = ${listenAddr}`,
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
    ].join('\n'),
  )
  chmodSync(dir, 0o755)
  // PgBouncer refuses to run as root: -u switches to the postgres user.
  const args = process.getuid?.() === 0 ? ['-u', 'postgres', join(dir, 'pgbouncer.ini')] : [join(dir, 'pgbouncer.ini')]
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let log = ''
  child.stdout?.on('data', (c: Buffer) => (log += c.toString()))
  child.stderr?.on('data', (c: Buffer) => (log += c.toString()))
  try {
    await waitForPort(port, 10_000, listenAddr)
  } catch (err) {
    child.kill('SIGKILL')
    throw new Error(`pgbouncer did not start: ${(err as Error).message}\n${log}`, { cause: err })
  }
  const url = `postgres://${encodeURIComponent(user)}@${listenAddr}:${port}/${encodeURIComponent(database)}`
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
