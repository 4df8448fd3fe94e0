// `pgonce pause QUEUE` and `pgonce resume QUEUE`: every worker of the queue stops or starts claiming.

import type { Command } from 'commander'
import { jsonOption, parseQueue } from './args.js'
import { withDb } from './connect.js'
import { emit } from './output.js'

export function registerPause(program: Command): void {
  for (const paused of [true, false]) {
    const verb = paused ? 'pause' : 'resume'
    program.command(verb)
      .description(paused
        ? 'stop the workers of a queue from claiming (they finish what they hold; adds are still accepted)'
        : 'let the workers of a queue claim again')
      .argument('<queue>', 'the queue', parseQueue)
      .addOption(jsonOption())
      .action((queue: string, opts: { json?: boolean }, cmd: Command) => withDb(cmd, async (db) => {
        await (paused ? db.queue(queue).pause() : db.queue(queue).resume())
        emit(opts.json, { queue, paused }, () => `queue ${queue}: ${paused ? 'paused' : 'resumed'}\n`)
      }))
  }
}
