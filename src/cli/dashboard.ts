// `pgonce dashboard`: serves the dashboard (docs/dashboard.md) on a port of this machine until Ctrl-C or SIGTERM.

import { type Command, Option } from 'commander'
import { checkBasePath } from '../dashboard/server/options.js'
import { ValidationError } from '../errors.js'
import { parseInteger } from './args.js'
import { type GlobalOptions, schemaOf, withDb } from './connect.js'
import { failure, usage } from './output.js'

interface DashboardCliOptions {
  port: number
  host: string
  basePath: string
  allowActions?: boolean
  readOnly?: boolean
}

function parseBasePath(value: string): string {
  try {
    return checkBasePath(value, '--base-path')
  } catch (err) {
    throw err instanceof ValidationError ? usage(`--base-path ${err.message.slice(err.field.length + 2)}`) : err
  }
}

/** Resolves on SIGINT or SIGTERM (once). */
function untilStopped(): Promise<void> {
  return new Promise((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      resolve()
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
  })
}

export function registerDashboard(program: Command): void {
  program
    .command('dashboard')
    .description('serve the web dashboard of the schema (read-only unless --allow-actions) until Ctrl-C')
    .option('--port <port>', 'the port to listen on', parseInteger(0, 65_535), 8080)
    .option(
      '--host <address>',
      'the address to listen on (another than 127.0.0.1 exposes it to the network)',
      '127.0.0.1',
    )
    .option('--base-path <path>', 'serve it under this path (behind a proxy that keeps the path)', parseBasePath, '')
    .addOption(new Option('--read-only', 'refuse every action (the default)').conflicts('allowActions'))
    .addOption(
      new Option('--allow-actions', 'allow retry, cancel, remove, promote, pause, resume, key removal, run now'),
    )
    .action(async (opts: DashboardCliOptions, cmd: Command) => {
      const schema = schemaOf(cmd)
      // The schema must exist and be up to date (the same check, and the same one-line errors, as every command).
      await withDb(cmd, async () => {})
      const { databaseUrl, connectTimeout } = cmd.optsWithGlobals<GlobalOptions>()
      const [{ createServer }, { dashboard }] = await Promise.all([
        import('node:http'),
        import('../dashboard/index.js'),
      ])
      const handler = dashboard({
        connectionString: databaseUrl,
        schema,
        basePath: opts.basePath === '' ? '/' : opts.basePath,
        readOnly: opts.allowActions !== true,
        connectTimeoutMs: Math.round(connectTimeout * 1000),
      })
      const server = createServer(handler)
      try {
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject)
          server.listen(opts.port, opts.host, () => resolve())
        })
      } catch (err) {
        await handler.close()
        const code = (err as NodeJS.ErrnoException).code
        throw failure(
          `cannot listen on ${opts.host}:${opts.port}: ${code === 'EADDRINUSE' ? 'address in use' : String(code)}`,
        )
      }
      const address = server.address() as { port: number }
      const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host
      // The URL of the dashboard, never the database's (it may hold a password).
      process.stdout.write(
        `pgonce dashboard: http://${host}:${address.port}${opts.basePath}/ (schema ${schema}, ` +
          `${opts.allowActions === true ? 'actions allowed' : 'read-only'}; Ctrl-C stops it)\n`,
      )
      await untilStopped()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await handler.close()
      process.stdout.write('pgonce dashboard: stopped\n')
    })
}
