// A Queue and a Worker of one definition must agree, at compile time: each program below is compiled on its own (the
// TypeScript compiler, the repository's tsconfig) and must fail with the error named beside it, and the matching one must
// compile clean. `new Worker<{ email: string }>` on a `Queue<{ userId: number }>` compiles; their definition's does not.

import { dirname, join } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'
import { repoRoot } from '../helpers/processes.js'

const header = `
import { defineQueue, Queue, Worker } from '../../src/index.js'
const options = { connectionString: 'postgres://localhost/x' }
const signups = defineQueue<{ welcome: { userId: number } }, { welcome: { sent: boolean } }>('signups')
export const queue = signups.queue(options)
`

/** Programs that must not compile, the error code each must fail with, and a word its message must hold. */
const mismatches: Record<string, { body: string; code: number; says: string }> = {
  'worker reads data of another shape': {
    body: `signups.worker(async (job) => ({ sent: job.data.email.length > 0 }), options)`,
    code: 2339,
    says: 'email',
  },
  'worker handles a name the queue lacks': {
    body: `signups.worker({ welcome: async () => ({ sent: true }), goodbye: async () => ({ sent: true }) }, options)`,
    code: 2353,
    says: 'goodbye',
  },
  'worker misses a name of the queue': {
    body: `signups.worker({} , options)`,
    code: 2345,
    says: 'welcome',
  },
  'worker returns another result': {
    body: `signups.worker(async () => 'done', options)`,
    code: 2345,
    says: 'sent',
  },
  'producer adds a name the queue lacks': {
    body: `void queue.add('wellcome', { userId: 1 })`,
    code: 2345,
    says: 'wellcome',
  },
  'producer adds data of another shape': {
    body: `void queue.add('welcome', { email: 'a@b.c' })`,
    code: 2353,
    says: 'email',
  },
  'the result of a waited job read as another type': {
    body: `export async function f(id: string): Promise<string | null> { return (await queue.waitForJob(id, { timeoutMs: 1 })).result }`,
    code: 2322,
    says: 'sent',
  },
}

const matching = `
signups.worker(async (job) => ({ sent: job.data.userId > 0 }), options)
export async function f(id: string): Promise<boolean | undefined> {
  const job = await queue.add('welcome', { userId: 1 })
  return (await queue.waitForJob(job.id, { timeoutMs: 1 })).result?.sent
}
// The untyped classes still take any pair: the mismatch compiles (this is what a definition prevents).
new Queue<{ userId: number }>('signups', options)
new Worker<{ email: string }>('signups', async (job) => job.data.email, options)
`

/** Compiles each program as a file of test/types/ (so that its imports resolve); its diagnostics by name. */
function compile(programs: Record<string, string>): Record<string, readonly ts.Diagnostic[]> {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(repoRoot, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'))
      },
    },
  )!
  const files = new Map(
    Object.entries(programs).map(([name, text], i) => [
      join(repoRoot, 'test', 'types', `fixture-${i}.ts`),
      { name, text },
    ]),
  )
  const host = ts.createCompilerHost(config.options)
  const getSourceFile = host.getSourceFile.bind(host)
  host.getSourceFile = (path, lang, ...rest) => {
    const virtual = files.get(path)
    return virtual ? ts.createSourceFile(path, virtual.text, lang) : getSourceFile(path, lang, ...rest)
  }
  const fileExists = host.fileExists.bind(host)
  host.fileExists = (path) => files.has(path) || fileExists(path)
  const program = ts.createProgram([...files.keys()], { ...config.options, noEmit: true }, host)
  const out: Record<string, readonly ts.Diagnostic[]> = {}
  for (const [path, { name }] of files) {
    const sf = program.getSourceFile(path)!
    out[name] = [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)]
  }
  expect(dirname([...files.keys()][0]!)).toBe(join(repoRoot, 'test', 'types'))
  return out
}

describe('a Queue and a Worker of one defineQueue definition', () => {
  it('fail to compile on every data, name or result mismatch, and compile when they match', () => {
    const programs = Object.fromEntries([
      ...Object.entries(mismatches).map(([name, m]) => [name, header + m.body]),
      ['matching', header + matching],
    ])
    const diagnostics = compile(programs)
    const text = (d: ts.Diagnostic) => ts.flattenDiagnosticMessageText(d.messageText, '\n')
    expect(diagnostics.matching!.map(text)).toEqual([])
    for (const [name, m] of Object.entries(mismatches)) {
      const found = diagnostics[name]!
      expect(found.length, `${name}: ${found.map(text).join(' | ')}`).toBe(1)
      expect(found[0]!.code, `${name}: ${text(found[0]!)}`).toBe(m.code)
      expect(text(found[0]!), name).toContain(m.says)
    }
  }, 120_000)
})
