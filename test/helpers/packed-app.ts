// Packs this repository as npm would publish it and installs the tarball into a scratch app; reads what it holds.

import { execFile } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, normalize, relative } from 'node:path'
import { promisify } from 'node:util'

const exec = promisify(execFile)

/** Runs a command; a failure's message carries what it printed (tsc reports its errors on stdout). */
export async function run(
  file: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv },
): Promise<{ stdout: string }> {
  try {
    return await exec(file, args, options)
  } catch (err) {
    const e = err as Error & { stdout?: string; stderr?: string }
    throw new Error(`${file} ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`, { cause: err })
  }
}

export interface PackedApp {
  /** The scratch app: `node_modules/pgonce` is the installed tarball. */
  app: string
  remove(): void
}

/**
 * `npm pack` (its prepack build) in a copy of what the package is built from (the repository's own dist/ is never
 * touched), then a scratch app that installs the tarball beside `others`, preferring npm's cache to the registry.
 */
export async function packAndInstall(root: string, others: string[]): Promise<PackedApp> {
  const work = mkdtempSync(join(tmpdir(), 'pgonce-pack-'))
  const repo = join(work, 'repo')
  mkdirSync(repo)
  // dev/ holds the UI's build script (dev/build-dashboard-ui.ts), which the prepack build runs.
  for (const f of [
    'src',
    'dev',
    'sql',
    'migrations',
    'docs',
    'README.md',
    'package.json',
    'tsconfig.json',
    'tsconfig.build.json',
  ]) {
    cpSync(join(root, f), join(repo, f), { recursive: true })
  }
  symlinkSync(join(root, 'node_modules'), join(repo, 'node_modules'))
  await run('npm', ['pack', '--pack-destination', work], { cwd: repo })
  const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'))
  if (tarball === undefined) throw new Error('npm pack made no tarball')

  const app = join(work, 'app')
  mkdirSync(app)
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'scratch-app', version: '1.0.0', type: 'module', private: true }),
  )
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(work, tarball), ...others], {
    cwd: app,
  })
  return { app, remove: () => rmSync(work, { recursive: true, force: true }) }
}

/** Every file below `dir`, as paths relative to it with forward slashes. */
export function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)).split('\\').join('/'))
}

/** The relative links of the Markdown file `doc` (a path below `root`), each as a path below `root` without its anchor. */
export function markdownLinks(root: string, doc: string): { doc: string; target: string }[] {
  const text = readFileSync(join(root, doc), 'utf8')
  return [...text.matchAll(/\]\(([^)\s#]+)(?:#[^)]*)?\)/g)]
    .map((m) => m[1] as string)
    .filter((href) => !/^[a-z]+:/.test(href))
    .map((href) => ({
      doc,
      target: normalize(join(dirname(doc), href))
        .split('\\')
        .join('/'),
    }))
}

/**
 * The class and interface members that the sources below `src` mark `@internal` in their doc comment, each with its
 * file relative to `src` (where the declaration file of the same name would carry it).
 */
export function internalMembers(src: string): { file: string; name: string }[] {
  const declaration =
    /\/\*\*(?:(?!\*\/)[\s\S])*@internal(?:(?!\*\/)[\s\S])*\*\/\s*(?:(?:public|protected|private|static|readonly|async|get|set)\s+)*([A-Za-z_$][\w$]*)/g
  return filesUnder(src)
    .filter((f) => f.endsWith('.ts'))
    .flatMap((file) =>
      [...readFileSync(join(src, file), 'utf8').matchAll(declaration)].map((m) => ({ file, name: m[1] as string })),
    )
}
