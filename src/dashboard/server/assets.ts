// The UI's built files (dist/dashboard-ui/, written by `npm run build:dashboard-ui`), served with a strict CSP.

import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const CSP =
  "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'"

/** dist/dashboard-ui/ of the package: found from this file by walking up to the folder holding package.json. */
function findAssets(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return join(dir, 'dist', 'dashboard-ui')
    const parent = dirname(dir)
    if (parent === dir) return join(dirname(fileURLToPath(import.meta.url)), 'dashboard-ui')
    dir = parent
  }
}

export const ASSETS_DIR = findAssets()

const TYPES = { 'app.js': 'text/javascript; charset=utf-8', 'app.css': 'text/css; charset=utf-8' } as const
export type AssetName = keyof typeof TYPES

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string)

const HTML_HEADERS = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-cache',
  'referrer-policy': 'same-origin',
}

/** index.html with `<base href="{basePath}/">` right after `<head>`; 503 and a hint when the UI was never built. */
export async function indexHtml(basePath: string, dir = ASSETS_DIR): Promise<Response> {
  let html: string
  try {
    html = await readFile(join(dir, 'index.html'), 'utf8')
  } catch {
    return new Response('The dashboard UI is not built: run: npm run build:dashboard-ui\n', {
      status: 503,
      headers: { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' },
    })
  }
  const base = `<base href="${escapeHtml(basePath)}/">`
  html = html.includes('<head>') ? html.replace('<head>', `<head>${base}`) : base + html
  return new Response(html, { headers: { 'content-type': 'text/html; charset=utf-8', ...HTML_HEADERS } })
}

export async function asset(name: AssetName, dir = ASSETS_DIR): Promise<Response> {
  try {
    const body = await readFile(join(dir, name))
    return new Response(body, {
      headers: { 'content-type': TYPES[name], 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' },
    })
  } catch {
    return new Response('not built: run npm run build:dashboard-ui\n', {
      status: 404,
      headers: { 'content-type': 'text/plain; charset=utf-8' },
    })
  }
}
