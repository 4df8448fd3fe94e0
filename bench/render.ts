// `npx tsx bench/render.ts bench/results/<file>.json`: prints the markdown table of a run written by bench/run.ts.

import { readFileSync } from 'node:fs'
import { renderMarkdown } from './report.js'
import type { BenchRun } from './run-result.js'

const file = process.argv[2]
if (!file) throw new Error('usage: npx tsx bench/render.ts bench/results/<file>.json')
const run = JSON.parse(readFileSync(file, 'utf8')) as BenchRun
if (!Array.isArray(run.limits) || !run.systems.every((s) => Array.isArray(s.passes))) {
  throw new Error(`${file} predates per-configuration passes (its table is in bench/README.md's history)`)
}
process.stdout.write(`${renderMarkdown(run)}\n`)
