// `pgonce schedulers list --queue Q`: a queue's job schedulers and their next ticks.

import type { Command } from 'commander'
import { jsonOption, queueOption } from './args.js'
import { withDb } from './connect.js'
import { emit, table } from './output.js'

export function registerSchedulers(program: Command): void {
  const schedulers = program.command('schedulers').description('the job schedulers of a queue')

  schedulers
    .command('list')
    .description('every scheduler of the queue, by id')
    .addOption(queueOption())
    .addOption(jsonOption())
    .action((opts: { queue: string; json?: boolean }, cmd: Command) =>
      withDb(cmd, async (db) => {
        const list = await db.queue(opts.queue).getJobSchedulers()
        emit(opts.json, { schedulers: list }, () =>
          list.length === 0
            ? `no schedulers in queue ${opts.queue}\n`
            : table(
                ['id', 'schedule', 'tz', 'job', 'nextRunAt', 'lastRunAt'],
                list.map((s) => [
                  s.id,
                  s.every === null ? s.pattern : `every ${s.every} ms`,
                  s.tz,
                  s.template.name,
                  s.nextRunAt,
                  s.lastRunAt,
                ]),
              ),
        )
      }),
    )
}
