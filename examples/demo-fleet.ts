// The demo's worker processes: starts them (tsx, `pgonce` mapped to src/ by tsconfig.json), kills one mid-send, stops the rest.

import { type ChildProcess, spawn } from 'node:child_process'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { HangNextSend, WorkerMessage } from './demo-messages.js'

const examplesDir = dirname(fileURLToPath(import.meta.url))
const repoRoot = resolve(examplesDir, '..')
const READY_TIMEOUT_MS = 30_000
const SEND_TIMEOUT_MS = 20_000
const STOP_TIMEOUT_MS = 5_000

/** The send a worker was in when it was killed. */
export interface KilledSend {
  pid: number
  jobId: string
  userId: number
  commentId: number
}

export class Fleet {
  private readonly children = new Set<ChildProcess>()
  /** Errors the workers reported (a lost lease, a failed statement): the demo shows them at the end. */
  readonly errors: string[] = []
  private readonly stderr: string[] = []

  constructor(private readonly env: Record<string, string>) {}

  /** Starts a worker process and resolves with it once it listens and has claimed for the first time. */
  async start(): Promise<ChildProcess> {
    // The same loader as `npm run demo`: from the repository root, tsconfig.json's `paths` send the worker's `import 'pgonce'` to src/.
    const child = spawn(process.execPath, ['--import', 'tsx', join(examplesDir, 'demo-worker.ts')], {
      cwd: repoRoot,
      env: { ...process.env, ...this.env },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    })
    this.children.add(child)
    child.once('exit', () => this.children.delete(child))
    child.stderr?.on('data', (chunk: Buffer) => this.stderr.push(chunk.toString()))
    child.on('message', (m: WorkerMessage) => {
      if (m.type === 'error') this.errors.push(`worker ${child.pid}: ${m.message}`)
    })
    await this.next(child, 'ready', READY_TIMEOUT_MS)
    return child
  }

  /** Lets `child` start its next send, SIGKILLs it inside that send, and resolves once it is dead. */
  private async killDuringSend(child: ChildProcess): Promise<KilledSend> {
    const sending = this.next(child, 'sending', SEND_TIMEOUT_MS)
    child.send({ type: 'hang-next-send' } satisfies HangNextSend)
    const send = await sending
    const dead = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGKILL')
    await dead
    return { pid: child.pid ?? 0, jobId: send.jobId, userId: send.userId, commentId: send.commentId }
  }

  /** Kills `child` inside a send (see killDuringSend) and starts a worker in its place. */
  async replaceDuringSend(child: ChildProcess): Promise<{ killed: KilledSend; replacement: ChildProcess }> {
    const killed = await this.killDuringSend(child)
    return { killed, replacement: await this.start() }
  }

  /** What the workers wrote to stderr (nothing, when all is well). */
  output(): string {
    return this.stderr.join('')
  }

  /** The workers' reported errors and stderr, for a failure message. */
  private diagnostics(): string {
    const errors = [...new Set(this.errors)].slice(0, 10)
    return (errors.length > 0 ? `\n${errors.join('\n')}` : '') + (this.output() !== '' ? `\n${this.output()}` : '')
  }

  /** SIGTERM (a graceful close) to every live worker; SIGKILL to any still alive after a few seconds. */
  async stopAll(): Promise<void> {
    const alive = [...this.children].filter((c) => c.exitCode === null && c.signalCode === null)
    await Promise.all(
      alive.map(async (child) => {
        const exited = new Promise<boolean>((resolve) => child.once('exit', () => resolve(true)))
        child.kill('SIGTERM')
        let timer: NodeJS.Timeout | undefined
        const late = new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), STOP_TIMEOUT_MS)
        })
        if (!(await Promise.race([exited, late]))) {
          child.kill('SIGKILL')
          await exited
        }
        clearTimeout(timer)
      }),
    )
  }

  /** The next message of `type` from `child`; rejects if the child exits first or nothing comes in time. */
  private next<T extends WorkerMessage['type']>(
    child: ChildProcess,
    type: T,
    timeoutMs: number,
  ): Promise<Extract<WorkerMessage, { type: T }>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => finish(new Error(`worker ${child.pid}: no '${type}' within ${timeoutMs} ms${this.diagnostics()}`)),
        timeoutMs,
      )
      const onMessage = (m: WorkerMessage): void => {
        if (m.type === type) finish(null, m as Extract<WorkerMessage, { type: T }>)
      }
      const onExit = (code: number | null, signal: string | null): void => {
        finish(new Error(`worker ${child.pid} exited (${signal ?? code}) before '${type}'${this.diagnostics()}`))
      }
      const finish = (err: Error | null, m?: Extract<WorkerMessage, { type: T }>): void => {
        clearTimeout(timer)
        child.off('message', onMessage)
        child.off('exit', onExit)
        if (err) reject(err)
        else resolve(m as Extract<WorkerMessage, { type: T }>)
      }
      child.on('message', onMessage)
      child.once('exit', onExit)
    })
  }
}
