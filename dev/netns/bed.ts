// The multi-host test bed: network namespaces ("hosts") on veth pairs to one bridge, a PostgreSQL cluster of the bed's
// own listening on the bridge's address, and a latency proxy (dev/latency-proxy.ts) per host in between. Root only.
//
//   bed 198.18.X.0/24 (X picked free, 198.18.0.0/15 only)        namespace pgonce-X-hN (eth0 198.18.X.(10+N))
//   bridge pgobX 198.18.X.1  ── veth pgobXhN ─────────────────── eth0
//   postgres 198.18.X.1:15432 (own data dir in /tmp/pgonce-bed-X, trust for the bed's subnet)
//   proxy of host N on 198.18.X.1:<random> → postgres: the host's URL goes through it
//
// Everything the bed makes is named after X, and /tmp/pgonce-bed-X/owner holds the pid that made it: destroy() (also on
// the process's exit, SIGINT and SIGTERM) removes it all, and create() first removes beds whose owner is gone (a run
// killed midway). Traffic goes only between these namespaces and the bed's own address.

import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { chownSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { LatencyProxy } from '../latency-proxy.js'

const PG_BIN = '/usr/lib/postgresql/15/bin'
const PG_PORT = 15432
const PREFIX = '/tmp/pgonce-bed-'

export interface BedHost {
  /** h1, h2, … */
  readonly name: string
  readonly netns: string
  /** The host's address (198.18.X.(10+N)). */
  readonly address: string
  /** The bridge's end of the host's veth pair: down is a cut cable. */
  readonly link: string
  /** The host's link to PostgreSQL (shape it, black-hole it). */
  readonly proxy: LatencyProxy
  /** PostgreSQL as the host reaches it: through its proxy. */
  readonly url: string
}

export interface BedOptions {
  hosts: number
  /** postgresql.conf settings for the bed's cluster. */
  settings?: Record<string, string | number>
  log?: (msg: string) => void
}

/** Why this process cannot make a bed (not root, no `ip`), or null when it can. */
export function bedUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'network namespaces need root (CI runs as root)'
  if (spawnSync('ip', ['netns', 'list'], { stdio: 'ignore' }).status !== 0) return 'iproute2 (`ip netns`) is missing'
  if (!existsSync(join(PG_BIN, 'postgres'))) return `no PostgreSQL 15 binaries in ${PG_BIN}`
  return null
}

function run(cmd: string, args: string[], ok: 'must' | 'may' = 'must'): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 60_000 })
  if (ok === 'must' && r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr || r.stdout}`)
  return r.stdout ?? ''
}

const asPostgres = (args: string[], ok: 'must' | 'may' = 'must'): string =>
  run('runuser', ['-u', 'postgres', '--', ...args], ok)

export class Bed {
  readonly hosts: BedHost[] = []
  /** The bed's PostgreSQL as the creating process reaches it: directly, no proxy. */
  readonly url: string
  readonly gateway: string
  private destroyed = false
  private readonly onExit = (): void => this.destroySync()
  private readonly onSignal = (signal: NodeJS.Signals): void => {
    this.destroySync()
    process.kill(process.pid, signal)
  }

  private constructor(
    readonly index: number,
    private readonly log: (msg: string) => void,
  ) {
    this.gateway = `198.18.${index}.1`
    this.url = `postgres://postgres@${this.gateway}:${PG_PORT}/postgres`
  }

  /** Makes a bed with `hosts` namespaces and its PostgreSQL started, removing stale beds first. */
  static async create(options: BedOptions): Promise<Bed> {
    const why = bedUnavailable()
    if (why !== null) throw new Error(`pgonce bed: ${why}`)
    sweepStaleBeds()
    const bed = new Bed(claimIndex(), options.log ?? (() => {}))
    process.once('exit', bed.onExit)
    process.once('SIGINT', bed.onSignal)
    process.once('SIGTERM', bed.onSignal)
    try {
      bed.makeNetwork(options.hosts)
      bed.startPostgres(options.settings ?? {})
      for (let n = 1; n <= options.hosts; n++) await bed.addProxy(n)
    } catch (err) {
      bed.destroySync()
      throw err
    }
    bed.log(`bed ${bed.index}: ${options.hosts} hosts, postgres on ${bed.gateway}:${PG_PORT}`)
    return bed
  }

  private get dir(): string {
    return `${PREFIX}${this.index}`
  }

  private makeNetwork(hosts: number): void {
    const bridge = `pgob${this.index}`
    run('ip', ['link', 'add', bridge, 'type', 'bridge'])
    run('ip', ['addr', 'add', `${this.gateway}/24`, 'dev', bridge])
    run('ip', ['link', 'set', bridge, 'up'])
    for (let n = 1; n <= hosts; n++) {
      const netns = `pgonce-${this.index}-h${n}`
      const link = `pgob${this.index}h${n}`
      const inner = `pgob${this.index}n${n}`
      run('ip', ['netns', 'add', netns])
      run('ip', ['link', 'add', link, 'type', 'veth', 'peer', 'name', inner])
      run('ip', ['link', 'set', inner, 'netns', netns])
      run('ip', ['link', 'set', link, 'master', bridge, 'up'])
      const inNs = (...args: string[]): string => run('ip', ['netns', 'exec', netns, 'ip', ...args])
      inNs('link', 'set', inner, 'name', 'eth0')
      inNs('addr', 'add', `198.18.${this.index}.${10 + n}/24`, 'dev', 'eth0')
      inNs('link', 'set', 'eth0', 'up')
      inNs('link', 'set', 'lo', 'up')
      this.hosts.push({
        name: `h${n}`,
        netns,
        address: `198.18.${this.index}.${10 + n}`,
        link,
        proxy: undefined as unknown as LatencyProxy,
        url: '',
      })
    }
  }

  private startPostgres(settings: Record<string, string | number>): void {
    const data = join(this.dir, 'data')
    mkdirSync(data, { recursive: true, mode: 0o700 })
    const { uid, gid } = postgresIds()
    chownSync(data, uid, gid)
    asPostgres([join(PG_BIN, 'initdb'), '-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'])
    writeFileSync(join(data, 'pg_hba.conf'), 'local all all trust\nhost all all 198.18.0.0/15 trust\n')
    const conf: Record<string, string | number> = {
      listen_addresses: `'${this.gateway}'`,
      port: PG_PORT,
      unix_socket_directories: `'${data}'`,
      max_connections: 300,
      fsync: 'off',
      ...settings,
    }
    const lines = Object.entries(conf).map(([k, v]) => `${k} = ${v}`)
    writeFileSync(join(data, 'postgresql.auto.conf'), `${lines.join('\n')}\n`)
    asPostgres([join(PG_BIN, 'pg_ctl'), '-D', data, '-l', join(data, 'postgres.log'), '-w', '-t', '60', 'start'])
  }

  private async addProxy(n: number): Promise<void> {
    const proxy = await LatencyProxy.start({
      listen: { host: this.gateway },
      target: { host: this.gateway, port: PG_PORT },
    })
    const host = this.hosts[n - 1] as { proxy: LatencyProxy; url: string }
    host.proxy = proxy
    host.url = `postgres://postgres@${this.gateway}:${proxy.port}/postgres`
  }

  /** Starts `command` inside `host`'s namespace (its only network is its veth to the bed); stdout and stderr piped. */
  spawn(
    host: BedHost,
    command: string[],
    env: Record<string, string> = {},
    stdin: 'ignore' | 'pipe' = 'ignore',
  ): ChildProcess {
    return spawn('ip', ['netns', 'exec', host.netns, ...command], {
      env: { ...process.env, ...env },
      stdio: [stdin, 'pipe', 'pipe'],
    })
  }

  /** Cuts `host`'s cable: its veth goes down on the bridge's side, every packet either way is lost. */
  cut(host: BedHost): void {
    run('ip', ['link', 'set', host.link, 'down'])
  }

  heal(host: BedHost): void {
    run('ip', ['link', 'set', host.link, 'up'])
  }

  /** Real packet loss inside `host`'s namespace, each way (iptables statistic); 0 removes it. */
  lose(host: BedHost, probability: number): void {
    const ipt = (...args: string[]): string => run('ip', ['netns', 'exec', host.netns, 'iptables', '-w', ...args])
    ipt('-F')
    if (probability <= 0) return
    for (const chain of ['INPUT', 'OUTPUT'])
      ipt('-A', chain, '-m', 'statistic', '--mode', 'random', '--probability', String(probability), '-j', 'DROP')
  }

  /** Packets dropped so far by `lose` in `host`'s namespace. */
  dropped(host: BedHost): number {
    const listed = run('ip', ['netns', 'exec', host.netns, 'iptables', '-w', '-L', '-v', '-n', '-x'])
    return listed
      .split('\n')
      .filter((l) => /\sDROP\s/.test(l))
      .reduce((sum, l) => sum + Number(l.trim().split(/\s+/)[0]), 0)
  }

  /** Restarts the bed's PostgreSQL (`-m fast`: sessions are terminated, as in a real restart). */
  restartPostgres(): void {
    const data = join(this.dir, 'data')
    asPostgres([join(PG_BIN, 'pg_ctl'), '-D', data, '-l', join(data, 'postgres.log'), '-w', '-m', 'fast', 'restart'])
  }

  /** Removes everything the bed made; safe to call twice. */
  async destroy(): Promise<void> {
    if (this.destroyed) return
    await Promise.all(this.hosts.map((h) => h.proxy?.close()))
    this.destroySync()
  }

  private destroySync(): void {
    if (this.destroyed) return
    this.destroyed = true
    process.off('exit', this.onExit)
    process.off('SIGINT', this.onSignal)
    process.off('SIGTERM', this.onSignal)
    removeBed(this.index)
    this.log(`bed ${this.index}: removed`)
  }
}

function postgresIds(): { uid: number; gid: number } {
  return { uid: Number(run('id', ['-u', 'postgres'])), gid: Number(run('id', ['-g', 'postgres'])) }
}

/** A free bed number: no bridge, no directory of that number. Its directory, made here, is the claim. */
function claimIndex(): number {
  const links = run('ip', ['-o', 'link', 'show'])
  for (let tries = 0; tries < 500; tries++) {
    const index = 1 + Math.floor(Math.random() * 254)
    if (links.includes(`pgob${index}:`) || links.includes(`pgob${index}@`)) continue
    try {
      mkdirSync(`${PREFIX}${index}`, { mode: 0o755 })
    } catch {
      continue
    }
    writeFileSync(`${PREFIX}${index}/owner`, String(process.pid))
    return index
  }
  throw new Error('pgonce bed: no free bed number in 198.18.1-254.0/24')
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Removes the beds whose owner process is gone (a run that was killed before it could clean up). */
export function sweepStaleBeds(): number[] {
  const indexes = new Set<number>()
  for (const entry of readdirSync('/tmp')) {
    const m = /^pgonce-bed-(\d+)$/.exec(entry)
    if (m !== null) indexes.add(Number(m[1]))
  }
  for (const line of run('ip', ['netns', 'list']).split('\n')) {
    const m = /^pgonce-(\d+)-h\d+/.exec(line)
    if (m !== null) indexes.add(Number(m[1]))
  }
  const stale = [...indexes].filter((i) => {
    const owner = `${PREFIX}${i}/owner`
    return !existsSync(owner) || !alive(Number(readFileSync(owner, 'utf8')))
  })
  for (const i of stale) removeBed(i)
  return stale
}

/** Stops bed `index`'s PostgreSQL, kills what runs in its namespaces, deletes them, its bridge and its directory. */
function removeBed(index: number): void {
  const data = `${PREFIX}${index}/data`
  if (existsSync(join(data, 'postmaster.pid')))
    asPostgres([join(PG_BIN, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', '-t', '30', 'stop'], 'may')
  for (const line of run('ip', ['netns', 'list']).split('\n')) {
    const netns = line.split(' ')[0] ?? ''
    if (!netns.startsWith(`pgonce-${index}-h`)) continue
    for (const pid of run('ip', ['netns', 'pids', netns], 'may').split('\n').filter(Boolean))
      run('kill', ['-KILL', pid], 'may')
    run('ip', ['netns', 'del', netns], 'may')
  }
  for (const line of run('ip', ['-o', 'link', 'show']).split('\n')) {
    const name = /^\d+: (pgob\d+(?:h\d+)?)[:@]/.exec(line)?.[1]
    if (name !== undefined && (name === `pgob${index}` || name.startsWith(`pgob${index}h`)))
      run('ip', ['link', 'del', name], 'may')
  }
  rmSync(`${PREFIX}${index}`, { recursive: true, force: true })
}
