// Builds the dashboard's browser UI (src/dashboard/ui) into dist/dashboard-ui/{index.html,app.js,app.css}: one
// minified script (Preact bundled in) and one stylesheet, no CDN, so the package works offline. `npm run build` runs it.

import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { basename } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build, type BuildOptions } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))
const source = `${root}src/dashboard/ui/`
const out = `${root}dist/dashboard-ui/`

// Each file is written beside its place and renamed over it: a test file building while another test serves the
// assets never serves half a file.
async function put(path: string, contents: Uint8Array | string): Promise<void> {
  const temporary = `${out}.${basename(path)}.${process.pid}.tmp`
  await writeFile(temporary, contents)
  await rename(temporary, path)
}

async function bundle(options: BuildOptions): Promise<void> {
  const { outputFiles } = await build({
    bundle: true,
    minify: true,
    logLevel: 'warning',
    legalComments: 'none',
    ...options,
    write: false,
  })
  for (const file of outputFiles) await put(file.path, file.contents)
}

await mkdir(out, { recursive: true })
await bundle({
  entryPoints: [`${source}main.tsx`],
  outfile: `${out}app.js`,
  format: 'iife',
  // Browsers of the last few years; the server's CSP allows no eval, which esbuild never emits.
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
})
await bundle({ entryPoints: [`${source}app.css`], outfile: `${out}app.css`, target: ['chrome100', 'safari15'] })
await put(`${out}index.html`, await readFile(`${source}index.html`))
console.log(`dashboard UI built into ${out}`)
