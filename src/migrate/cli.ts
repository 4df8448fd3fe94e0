#!/usr/bin/env node
// `pgonce migrate`: applies pgonce's migrations from the command line.

import { Command } from 'commander'
import { ValidationError } from '../errors.js'
import { migrate } from './runner.js'

const program = new Command('pgonce')
program
  .command('migrate')
  .description('create or update the pgonce schema')
  .option('-c, --connection <url>', 'connection string (Default: $DATABASE_URL)')
  .option('-s, --schema <name>', 'schema name', 'pgonce')
  .action(async (o: { connection?: string; schema: string }) => {
    const connectionString = o.connection ?? process.env.DATABASE_URL
    if (!connectionString) program.error('give --connection or set DATABASE_URL')
    try {
      const { applied } = await migrate({ connectionString, schema: o.schema })
      process.stdout.write(applied.length ? `applied ${applied.join(', ')}\n` : 'already up to date\n')
    } catch (err) {
      // Bad input and database errors are reported in one line, not as a stack trace.
      program.error(`pgonce migrate: ${err instanceof ValidationError ? err.message : String(err)}`)
    }
  })
await program.parseAsync()
