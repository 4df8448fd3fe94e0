// How the built CLI fails: one line on stderr (no stack trace, never the URL's password) and the documented exit code
// — 2 for usage (commander's own errors too), 1 for failures (unreachable server, missing schema, job not found).

import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { type AddressInfo, type Server, createServer } from 'node:net'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { cliSuite, runCli } from './helpers/cli-support.js'

const suite = cliSuite('cli_errors')

const cli = suite.run

/** Exit `code`, nothing on stdout, and `message` as the one line on stderr. */
function fails(
  result: { code: number | null; stdout: string; stderr: string },
  code: number,
  message: string | RegExp,
): void {
  expect(result.code).toBe(code)
  expect(result.stdout).toBe('')
  expect(result.stderr).toMatch(/^error: [^\n]*\n$/)
  if (typeof message === 'string') expect(result.stderr).toBe(`error: ${message}\n`)
  else expect(result.stderr).toMatch(message)
}

async function listening(onConnection: () => void = () => {}): Promise<Server> {
  const server = createServer(onConnection)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return server
}

describe.concurrent('errors', () => {
  it('no URL, or one that is not postgres://, is a usage error (2)', async () => {
    fails(await runCli(suite.main, ['stats']), 2, 'no database: give --database-url <url> or set DATABASE_URL')
    for (const url of ['not a url', 'mysql://localhost/app', 'postgres://%zz@localhost/app']) {
      fails(
        await runCli(suite.main, ['stats', '--database-url', url]),
        2,
        'bad database URL: expected postgres://user:password@host:port/database',
      )
    }
  })

  it('a closed port fails at once (1), naming host and port but not the password', async () => {
    const server = await listening()
    const { port } = server.address() as AddressInfo
    await new Promise((resolve) => server.close(resolve))
    const result = await runCli(suite.main, ['stats', '--database-url', `postgres://app:hunter2@127.0.0.1:${port}/app`])
    fails(result, 1, `cannot connect to 127.0.0.1:${port}: connection refused (is PostgreSQL running there?)`)
    expect(result.stderr).not.toContain('hunter2')
  })

  it('a server that never answers is given up after --connect-timeout (1)', async () => {
    const server = await listening()
    try {
      const { port } = server.address() as AddressInfo
      // The CLI's own start (seconds on a loaded machine) is not the timeout's: timed first, with --version.
      let started = Date.now()
      await runCli(suite.main, ['--version'])
      const startup = Date.now() - started
      started = Date.now()
      const result = await runCli(suite.main, [
        'jobs',
        'list',
        '--queue',
        'q',
        '--connect-timeout',
        '0.3',
        '--database-url',
        `postgres://postgres@127.0.0.1:${port}/app`,
      ])
      fails(result, 1, `cannot connect to 127.0.0.1:${port}: no answer within 0.3 s`)
      // Not the default 5 s: the start, 0.3 s, and a margin well under the default's.
      expect(Date.now() - started).toBeLessThan(startup + 3_500)
    } finally {
      server.close()
    }
  })

  it('a missing database or schema (1); reads never create the schema', async () => {
    fails(
      await runCli(suite.main, [
        'stats',
        '--database-url',
        `${suite.db.url.replace(/\/[^/?]*(\?|$)/, '/no_such_db_x$1')}`,
      ]),
      1,
      /^error: [^:]+:\d+: database "no_such_db_x" does not exist\n$/,
    )
    const schema = `t_cli_missing_${randomBytes(4).toString('hex')}`
    fails(
      await suite.runIn(schema, 'stats'),
      1,
      `schema ${schema} does not exist: run \`pgonce migrate --schema ${schema}\``,
    )
    fails(await suite.runIn(schema, 'pause', 'q'), 1, /does not exist/)
    const { rows } = await suite.db.pool.query('select 1 from pg_namespace where nspname = $1', [schema])
    expect(rows).toEqual([])
    fails(
      await suite.runIn('Not-A-Schema', 'stats'),
      2,
      '--schema must match [a-z_][a-z0-9_]{0,47} and not be a system schema',
    )
  })

  it('a schema missing a migration (1): run migrate', async () => {
    const schema = `t_cli_behind_${randomBytes(4).toString('hex')}`
    try {
      await suite.runIn(schema, 'migrate')
      await suite.db.pool.query(
        `delete from "${schema}".migrations where filename = (select max(filename) from "${schema}".migrations)`,
      )
      fails(
        await suite.runIn(schema, 'stats'),
        1,
        `schema ${schema} is not up to date (1 migration to apply): run \`pgonce migrate --schema ${schema}\``,
      )
    } finally {
      await suite.db.pool.query(`drop schema if exists "${schema}" cascade`)
    }
  })

  it("commander's usage errors exit 2: unknown command or option, missing option or argument, bad values, extra arguments", async () => {
    fails(await cli('frobnicate'), 2, "unknown command 'frobnicate'")
    fails(await cli('stats', '--frobnicate'), 2, "unknown option '--frobnicate'")
    fails(await cli('jobs', 'list'), 2, "required option '--queue <name>' not specified")
    fails(await cli('jobs', 'show', '--queue', 'q'), 2, "missing required argument 'id'")
    fails(await cli('jobs', 'show', '1', '2', '--queue', 'q'), 2, /^error: too many arguments/)
    fails(
      await cli('jobs', 'show', 'abc', '--queue', 'q'),
      2,
      /value 'abc' is invalid for argument 'id'\. must be a job id/,
    )
    fails(await cli('jobs', 'list', '--queue', 'bad queue'), 2, /argument 'bad queue' is invalid\. must match/)
    fails(
      await cli('jobs', 'list', '--queue', 'q', '--state', 'sleeping'),
      2,
      /argument 'sleeping' is invalid\. must be one of waiting, delayed/,
    )
    fails(await cli('jobs', 'list', '--queue', 'q', '--limit', '0'), 2, /must be a whole number from 1 to 10000/)
    fails(await cli('stats', '--watch', '--interval', '5'), 2, /must be a whole number from 100 to 3600000/)
    fails(await cli('stats', '--connect-timeout', '-1'), 2, /must be a number of seconds/)
  })

  it('no command, or a group without its subcommand: help on stderr, exit 2; --help and --version exit 0', async () => {
    for (const args of [[], ['jobs']]) {
      const result = await cli(...args)
      expect([result.code, result.stdout]).toEqual([2, ''])
      expect(result.stderr).toContain('Usage: pgonce')
    }
    const help = await cli('jobs', '--help')
    expect([help.code, help.stderr]).toEqual([0, ''])
    expect(help.stdout).toMatch(/list \[options\][\s\S]*show \[options\] <id>[\s\S]*retry[\s\S]*cancel[\s\S]*remove/)
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string
    }
    expect(await cli('--version')).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' })
  })

  it('job not found is a failure (1) for show, retry, cancel and remove', async () => {
    for (const command of ['show', 'cancel', 'remove']) {
      fails(await cli('jobs', command, '424242', '--queue', 'q'), 1, 'job 424242 not found in queue q')
    }
    fails(await cli('jobs', 'retry', '424242', '--queue', 'q'), 1, 'cannot retry job 424242: no such job (NOT_FOUND)')
  })

  it('the built main.js is executable by its shebang', async () => {
    expect(readFileSync(suite.main, 'utf8').split('\n', 1)[0]).toBe('#!/usr/bin/env node')
    const { stdout } = await promisify(execFile)(suite.main, ['--help'])
    expect(stdout).toContain('Usage: pgonce')
  })
})
