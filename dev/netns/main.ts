// The test bed by hand: `tsx dev/netns/main.ts up [--hosts 3] [--rtt 2]` makes a bed, prints how to reach it, and
// removes it on Ctrl-C; `tsx dev/netns/main.ts sweep` removes beds left by killed runs. Root only (dev/netns/bed.ts).

import { Bed, sweepStaleBeds } from './bed.js'

const [command = 'up', ...rest] = process.argv.slice(2)
const flag = (name: string, fallback: number): number => {
  const i = rest.indexOf(`--${name}`)
  return i === -1 ? fallback : Number(rest[i + 1])
}

if (command === 'sweep') {
  const removed = sweepStaleBeds()
  process.stdout.write(removed.length === 0 ? 'no stale beds\n' : `removed beds ${removed.join(', ')}\n`)
} else if (command === 'up') {
  const bed = await Bed.create({ hosts: flag('hosts', 3), log: (m) => process.stdout.write(`${m}\n`) })
  for (const h of bed.hosts) h.proxy.roundTrip(flag('rtt', 0))
  process.stdout.write(`postgres (direct): ${bed.url}\n`)
  for (const h of bed.hosts)
    process.stdout.write(`${h.name}: ip netns exec ${h.netns} <command>   postgres via its proxy: ${h.url}\n`)
  process.stdout.write('Ctrl-C removes the bed\n')
  // The bed's own SIGINT handler removes it and re-raises the signal.
  setInterval(() => {}, 60_000)
} else {
  process.stderr.write('usage: tsx dev/netns/main.ts up [--hosts N] [--rtt ms] | sweep\n')
  process.exit(2)
}
