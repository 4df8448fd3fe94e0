// Builds the dashboard's browser UI (src/dashboard/ui) into dist/dashboard-ui/{index.html,app.js,app.css}: one
// minified script (Preact bundled in) and one stylesheet, no CDN, so the package works offline. `npm run build` runs it.

import { copyFile, mkdir, rm } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))
const source = `${root}src/dashboard/ui/`
const out = `${root}dist/dashboard-ui/`

await rm(out, { recursive: true, force: true })
await mkdir(out, { recursive: true })
const common = { bundle: true, minify: true, logLevel: 'warning', legalComments: 'none' } as const
await build({
  ...common,
  entryPoints: [`${source}main.tsx`],
  outfile: `${out}app.js`,
  format: 'iife',
  // Browsers of the last few years; the server's CSP allows no eval, which esbuild never emits.
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
})
await build({
  ...common,
  entryPoints: [`${source}app.css`],
  outfile: `${out}app.css`,
  target: ['chrome100', 'safari15'],
})
await copyFile(`${source}index.html`, `${out}index.html`)
console.log(`dashboard UI built into ${out}`)
