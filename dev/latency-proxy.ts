// A delaying TCP proxy: the network between a worker and PostgreSQL, shaped in user space (this machine's kernel has no
// netem qdisc). Per direction: a delay, a jitter, a loss rate; and, on command, a black hole or a reset of every
// connection. Used by the namespace test bed (dev/netns/bed.ts), the latency bench and `npm run chaos -- --netns`.
//
// Loss is modelled as TCP shows it to the application: a lost segment is retransmitted after an RTO, so the chunk (and
// everything behind it in that direction, in order) arrives `retransmitMs` late; nothing is reordered or vanishes. Real
// packet loss, with the kernel's own retransmissions, is an iptables rule inside a namespace (Bed.lose).
//
//   tsx dev/latency-proxy.ts --listen 127.0.0.1:6432 --target 127.0.0.1:5432 --delay 1.35 [--jitter 0.2] [--loss 0.01]
//   then on stdin: `delay up 2`, `jitter down 0.5`, `loss both 0.05`, `blackhole on|off`, `reset`, `stats`

import { type Server, type Socket, connect, createServer } from 'node:net'
import { fileURLToPath } from 'node:url'

/** How one direction of the link behaves. */
export interface LinkShape {
  /** One-way delay in ms (half the round trip this direction adds). */
  delayMs: number
  /** Up to this many ms more, uniformly at random, per chunk (order is kept: a chunk never overtakes the one before). */
  jitterMs: number
  /** Probability that a chunk is "lost" and arrives `retransmitMs` late, as a TCP retransmission would. */
  lossRate: number
  /** What a loss costs. (Default: 200, Linux's minimum RTO) */
  retransmitMs: number
}

export type Direction = 'up' | 'down' | 'both'

export interface LatencyProxyOptions {
  listen: { host: string; port?: number }
  target: { host: string; port: number }
  /** Client → server. */
  up?: Partial<LinkShape>
  /** Server → client. */
  down?: Partial<LinkShape>
}

const IDLE: LinkShape = { delayMs: 0, jitterMs: 0, lossRate: 0, retransmitMs: 200 }
/** Bytes queued in one direction before its source is paused (TCP's window, roughly). */
const HIGH_WATER = 1 << 20

/** One direction of one connection: chunks queued with the time they are due, delivered in order. */
class Pipe {
  private readonly queue: { at: number; chunk: Buffer }[] = []
  private queued = 0
  private lastDue = 0
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly from: Socket,
    private readonly to: Socket,
    private readonly link: { shape: LinkShape; holding: boolean },
  ) {
    from.on('data', (chunk: Buffer) => this.push(chunk))
  }

  private push(chunk: Buffer): void {
    const { delayMs, jitterMs, lossRate, retransmitMs } = this.link.shape
    const now = performance.now()
    let due = now + delayMs + Math.random() * jitterMs
    if (lossRate > 0 && Math.random() < lossRate) due += retransmitMs
    // An unshaped link with nothing queued forwards at once (the loopback baseline pays no timer).
    if (due <= now && this.queue.length === 0 && !this.link.holding) {
      if (!this.to.destroyed) this.to.write(chunk)
      return
    }
    this.lastDue = Math.max(this.lastDue, due)
    this.queue.push({ at: this.lastDue, chunk })
    this.queued += chunk.length
    if (this.queued > HIGH_WATER) this.from.pause()
    this.schedule()
  }

  /** Delivers what is due (nothing while the link is a black hole) and sets a timer for the next chunk. */
  flush(): void {
    clearTimeout(this.timer)
    this.timer = undefined
    if (this.link.holding) return
    const now = performance.now()
    while (this.queue.length > 0 && this.queue[0]!.at <= now + 0.05) {
      const { chunk } = this.queue.shift()!
      this.queued -= chunk.length
      if (!this.to.destroyed) this.to.write(chunk)
    }
    if (this.queued <= HIGH_WATER / 2 && this.from.isPaused()) this.from.resume()
    this.schedule()
  }

  /** Node's timers fire no earlier than 1 ms: a one-way delay below that costs about 1 ms (bench/README.md measures the RTT). */
  private schedule(): void {
    if (this.timer !== undefined || this.queue.length === 0 || this.link.holding) return
    this.timer = setTimeout(() => this.flush(), Math.max(0, this.queue[0]!.at - performance.now()))
  }

  stop(): void {
    clearTimeout(this.timer)
    this.queue.length = 0
  }
}

/** A TCP proxy from `listen` to `target` that delays, jitters, "loses" and black-holes on command. */
export class LatencyProxy {
  private readonly links: Record<'up' | 'down', { shape: LinkShape; holding: boolean }>
  private readonly connections = new Set<{ client: Socket; server: Socket; pipes: Pipe[] }>()
  /** Connections accepted since the start (for tests and stats). */
  accepted = 0

  private constructor(
    private readonly server: Server,
    private readonly options: LatencyProxyOptions,
  ) {
    this.links = {
      up: { shape: { ...IDLE, ...options.up }, holding: false },
      down: { shape: { ...IDLE, ...options.down }, holding: false },
    }
    server.on('connection', (client) => this.accept(client))
  }

  static async start(options: LatencyProxyOptions): Promise<LatencyProxy> {
    const server = createServer({ noDelay: true })
    const proxy = new LatencyProxy(server, options)
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(options.listen.port ?? 0, options.listen.host, () => resolve())
    })
    return proxy
  }

  get port(): number {
    return (this.server.address() as { port: number }).port
  }

  get host(): string {
    return this.options.listen.host
  }

  /** Open connections now. */
  get open(): number {
    return this.connections.size
  }

  /** Changes one direction (or both); chunks already queued keep the time they were given. */
  shape(direction: Direction, shape: Partial<LinkShape>): void {
    for (const d of directions(direction)) this.links[d].shape = { ...this.links[d].shape, ...shape }
  }

  /** A symmetric round trip of `rttMs`, jitter split over both directions. */
  roundTrip(rttMs: number, jitterMs = 0): void {
    this.shape('both', { delayMs: rttMs / 2, jitterMs: jitterMs / 2 })
  }

  /**
   * A black hole: nothing is forwarded either way, connections stay open and new ones are accepted but hear nothing.
   * Lifting it delivers what was held, as TCP's retransmissions would once a partition heals in time.
   */
  blackhole(on: boolean): void {
    this.links.up.holding = on
    this.links.down.holding = on
    if (!on) for (const c of this.connections) for (const p of c.pipes) p.flush()
  }

  /** Resets every open connection (both ends see ECONNRESET). */
  reset(): void {
    for (const c of this.connections) {
      c.client.resetAndDestroy()
      c.server.resetAndDestroy()
    }
  }

  async close(): Promise<void> {
    this.reset()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  private accept(client: Socket): void {
    this.accepted++
    client.setNoDelay(true)
    const server = connect({ host: this.options.target.host, port: this.options.target.port, noDelay: true })
    const pipes = [new Pipe(client, server, this.links.up), new Pipe(server, client, this.links.down)]
    const conn = { client, server, pipes }
    this.connections.add(conn)
    const end = (): void => {
      if (!this.connections.delete(conn)) return
      for (const p of pipes) p.stop()
      client.destroy()
      server.destroy()
    }
    // An end or error on either side ends both: the peer sees the connection go, as it would without the proxy.
    for (const s of [client, server]) {
      s.on('error', end)
      s.on('close', end)
    }
  }
}

function directions(d: Direction): ('up' | 'down')[] {
  return d === 'both' ? ['up', 'down'] : [d]
}

function hostPort(text: string): { host: string; port: number } {
  const at = text.lastIndexOf(':')
  return { host: text.slice(0, at), port: Number(text.slice(at + 1)) }
}

/** The command line: flags as in the header, then commands on stdin. */
async function main(argv: string[]): Promise<void> {
  const flag = (name: string): string | undefined => {
    const i = argv.indexOf(`--${name}`)
    return i === -1 ? undefined : argv[i + 1]
  }
  const listen = flag('listen')
  const target = flag('target')
  if (listen === undefined || target === undefined) {
    process.stderr.write('usage: tsx dev/latency-proxy.ts --listen HOST:PORT --target HOST:PORT [--delay ms]\n')
    process.exit(2)
  }
  const shape = {
    delayMs: Number(flag('delay') ?? 0),
    jitterMs: Number(flag('jitter') ?? 0),
    lossRate: Number(flag('loss') ?? 0),
  }
  const proxy = await LatencyProxy.start({ listen: hostPort(listen), target: hostPort(target), up: shape, down: shape })
  process.stdout.write(`listening on ${proxy.host}:${proxy.port} -> ${target}\n`)
  process.stdin.setEncoding('utf8')
  let buffered = ''
  process.stdin.on('data', (text: string) => {
    buffered += text
    const lines = buffered.split('\n')
    buffered = lines.pop() ?? ''
    for (const line of lines) command(proxy, line.trim().split(/\s+/))
  })
  process.once('SIGINT', () => void proxy.close().then(() => process.exit(0)))
  process.once('SIGTERM', () => void proxy.close().then(() => process.exit(0)))
}

function command(proxy: LatencyProxy, [verb, a, b]: string[]): void {
  const fields: Record<string, keyof LinkShape> = { delay: 'delayMs', jitter: 'jitterMs', loss: 'lossRate' }
  if (verb !== undefined && verb in fields && (a === 'up' || a === 'down' || a === 'both') && b !== undefined)
    proxy.shape(a, { [fields[verb]!]: Number(b) })
  else if (verb === 'blackhole') proxy.blackhole(a === 'on')
  else if (verb === 'reset') proxy.reset()
  else if (verb === 'stats') process.stdout.write(`open=${proxy.open} accepted=${proxy.accepted}\n`)
  else if (verb) process.stdout.write(`unknown command: ${[verb, a, b].join(' ')}\n`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main(process.argv.slice(2))
