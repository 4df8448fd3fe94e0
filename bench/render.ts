// `npx tsx bench/render.ts bench/results/<file>.json`: prints the table of a run written by `npm run bench` again.

import { readFileSync } from 'node:fs'
import { renderMarkdown } from './report.js'
import type { BenchRun } from './results.js'

const file = process.argv[2]
if (!file) throw new Error('usage: npx tsx bench/render.ts bench/results/<file>.json')
const run = JSON.parse(readFileSync(file, 'utf8')) as BenchRun
if (!Array.isArray(run.rounds))
  throw new Error(`${file} was written by an earlier harness: its table is in bench/README.md`)
process.stdout.write(`${renderMarkdown(run)}\n`)
