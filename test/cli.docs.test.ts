// Every `$ pgonce …` example in the console blocks of docs/cli.md, run in order by the built CLI against the seeded
// queues: its output (stdout, then stderr) is what the page shows, timestamps aside; its exit code is the `$ echo $?`
// line after it, else 0 (or not 0 when the page shows an `error:` line).

import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { cliSuite, runCli } from './helpers/cli-support.js'
import { seedEmails } from './helpers/cli-seed.js'

interface Example {
  args: string[]
  output: string
  code: number | null
}

function examples(markdown: string): Example[] {
  const found: Example[] = []
  for (const [, block] of markdown.matchAll(/```console\n([\s\S]*?)```/g)) {
    let current: Example | undefined
    const lines = (block as string).split('\n').slice(0, -1)
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i] as string
      if (line === '$ echo $?') {
        ;(current as Example).code = Number(lines[++i])
      } else if (line.startsWith('$ pgonce')) {
        current = { args: line.split(/\s+/).slice(2), output: '', code: null }
        found.push(current)
      } else {
        ;(current as Example).output += `${line}\n`
      }
    }
  }
  return found
}

/** Timestamps differ from run to run; all have one width, so tables keep their alignment. */
const normalize = (text: string) => text.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z/g, '<time>')

const suite = cliSuite('cli_docs', seedEmails)

it('docs/cli.md: every example prints what the page shows and exits as it says', async () => {
  const all = examples(readFileSync(join(import.meta.dirname, '..', 'docs', 'cli.md'), 'utf8'))
  expect(all.length).toBeGreaterThan(20)
  for (const example of all) {
    const args = example.args.includes('--schema') ? example.args : [...example.args, '--schema', suite.db.schema]
    const { code, stdout, stderr } = await runCli(suite.main, args, { DATABASE_URL: suite.db.url })
    const shown = `$ pgonce ${example.args.join(' ')}`
    expect(normalize((stdout + stderr).replaceAll(suite.db.schema, 'pgonce')), shown).toBe(normalize(example.output))
    if (example.code !== null) expect(code, shown).toBe(example.code)
    else if (/^error:/m.test(example.output)) expect(code, shown).not.toBe(0)
    else expect(code, shown).toBe(0)
  }
})
