#!/usr/bin/env node
// The pgonce CLI (docs/cli.md): the program's options, its commands, and the exit code (0 ok, 1 failure, 2 usage).

import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Command, Option } from 'commander'
import { PACKAGE_ROOT } from '../db/sql-files.js'
import { parseSeconds } from './args.js'
import { registerDashboard } from './dashboard.js'
import { registerDedup } from './dedup.js'
import { registerFailed } from './failed.js'
import { registerJobs } from './jobs.js'
import { registerLimits } from './limits.js'
import { registerMigrate } from './migrate.js'
import { reportError } from './output.js'
import { registerPause } from './pause.js'
import { registerSchedulers } from './schedulers.js'
import { registerStats } from './stats.js'

const { version } = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }

const program = new Command('pgonce')
  .description('operate a pgonce schema: migrate, inspect and control queues, jobs and dedup keys')
  .version(version)
  .addOption(new Option('--database-url <url>', 'PostgreSQL URL').env('DATABASE_URL'))
  .option('--schema <name>', "the schema holding pgonce's tables", 'pgonce')
  .option('--connect-timeout <seconds>', 'give up connecting after this long', parseSeconds, 5)
  // Settings inherited by every command added below: each help lists these options too; commander throws instead of
  // exiting, and reportError maps its errors (usage, unknown command or option, bad argument) to exit code 2.
  .configureHelp({ showGlobalOptions: true })
  .exitOverride()

registerMigrate(program)
registerStats(program)
registerJobs(program)
registerDedup(program)
registerFailed(program)
registerPause(program)
registerLimits(program)
registerSchedulers(program)
registerDashboard(program)

// A reader that stops early (`pgonce sql | head`) is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err
  process.exit()
})

try {
  await program.parseAsync()
} catch (err) {
  process.exitCode = reportError(err)
}
