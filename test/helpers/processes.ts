// Child processes of the tests: the scripts of test/helpers/children/ run with tsx, their exit, whether a worker child
// survived, CPU load, and which commands are installed.

import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const execFileAsync = promisify(execFile)

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')

export type Child = ChildProcess & {
  /** Everything the child wrote so far (stdout and stderr). */
  output: () => string
  /** The JSON lines the child wrote on stdout, parsed. */
  messages: () => Record<string, unknown>[]
}

/** Starts `test/helpers/children/<script>` as `node --import tsx <script>` from the repo root, with extra environment variables. */
export function spawnFixture(script: string, env: Record<string, string>): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'test', 'helpers', 'children', script)], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  return captured(child)
}

/** Keeps what `child` writes (its stdout and stderr must be pipes) for `output()` and `messages()`. */
export function captured(child: ChildProcess): Child {
  let out = ''
  let stdout = ''
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString()
    stdout += c.toString()
  })
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()))
  const messages = (): Record<string, unknown>[] =>
    stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => {
        try {
          return JSON.parse(l) as Record<string, unknown>
        } catch {
          return {}
        }
      })
  return Object.assign(child, { output: () => out, messages })
}

/** Resolves with the exit code (or signal) of a child process. */
export function exited(child: ChildProcess): Promise<number | string | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode ?? child.signalCode)
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)))
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

/** The path of `command` (a name or a path), or null when it is not installed. */
export async function commandPath(command: string): Promise<string | null> {
  try {
    const { stdout } = await execFileAsync('sh', ['-c', `command -v ${command}`])
    return stdout.trim() || null
  } catch {
    return null
  }
}
