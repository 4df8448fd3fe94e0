// The queues: counts per state (each a link to those jobs), throughput over the last hour, paused, limits, retention.
import type { JSX } from 'preact'
import { call, STATES, type QueueInfo, type QueueLimits } from '../api.js'
import { ActionButton, Cell, Heading, PollStatus, Sparkline } from '../components.js'
import { duration } from '../format.js'
import { usePoll } from '../poll.js'
import { href } from '../route.js'
import { Table } from '../table.js'

export function QueuesView(): JSX.Element {
  const polled = usePoll<{ queues: QueueInfo[] }>('queues')
  const queues = polled.data?.queues ?? []
  return (
    <section aria-labelledby="view-title">
      <Heading>Queues</Heading>
      <PollStatus polled={polled} />
      <Table
        columns={['Queue', ...STATES, 'Last hour', 'Limits', 'Retention', 'Actions']}
        rows={queues}
        loaded={polled.data !== undefined}
        empty="No queue has jobs yet."
        row={(queue) => <QueueRow key={queue.name} queue={queue} reload={polled.reload} />}
      />
    </section>
  )
}

function QueueRow({ queue, reload }: { queue: QueueInfo; reload: () => void }): JSX.Element {
  const { completedLastHour, failedLastHour, perMinute } = queue.throughput
  const path = `queues/${encodeURIComponent(queue.name)}`
  return (
    <tr>
      <th scope="row" data-label="Queue">
        <a href={href('jobs', { queue: queue.name })}>{queue.name}</a>
        {queue.paused && <span class="badge paused">paused</span>}
      </th>
      {STATES.map((state) => (
        <Cell key={state} label={state}>
          <a class="num" href={href('jobs', { queue: queue.name, state })} aria-label={`${queue.name} ${state}`}>
            {queue.countsEstimated?.includes(state) ? `≈${queue.counts[state]}` : (queue.counts[state] ?? 0)}
          </a>
        </Cell>
      ))}
      <Cell label="Last hour">
        <span class="throughput">
          {completedLastHour} done, {failedLastHour} failed
        </span>
        <Sparkline values={perMinute} label={`${queue.name}: completions per minute over the last hour`} />
      </Cell>
      <Cell label="Limits">{limitsText(queue.limits)}</Cell>
      <Cell label="Retention">{summary(queue.retention, 'kept')}</Cell>
      <Cell label="Actions">
        {queue.paused ? (
          <ActionButton action="resume" run={() => act(path, 'resume', queue.name)} done={reload}>
            Resume
          </ActionButton>
        ) : (
          <ActionButton action="pause" run={() => act(path, 'pause', queue.name)} done={reload}>
            Pause
          </ActionButton>
        )}
      </Cell>
    </tr>
  )
}

async function act(path: string, verb: 'pause' | 'resume', name: string): Promise<string> {
  await call(`${path}/${verb}`, 'POST')
  return `Queue ${name} ${verb === 'pause' ? 'paused' : 'resumed'}`
}

/**
 * Limits as `2 of 5 running, 30 of 100 starts per 1 s, held by ctx.rateLimit; per group: 1 running, 10 starts per 1 s
 * (3 group slots in use)` (docs/flow-control.md).
 */
function limitsText(limits: QueueLimits | null): string {
  if (limits === null) return 'none'
  const parts: string[] = []
  if (limits.concurrency !== null) parts.push(`${limits.slotsInUse} of ${limits.concurrency} running`)
  if (limits.rateLimit !== null) {
    const { max, durationMs } = limits.rateLimit
    parts.push(`${limits.startsInWindow} of ${max} starts per ${duration(durationMs)}`)
  }
  if (limits.heldUntil !== null) parts.push('held by ctx.rateLimit')
  const text = parts.join(', ')
  const group = limits.group
  if (group === null) return text === '' ? 'none' : text
  const each: string[] = []
  if (group.concurrency !== null) each.push(`${group.concurrency} running`)
  if (group.rateLimit !== null) each.push(`${group.rateLimit.max} starts per ${duration(group.rateLimit.durationMs)}`)
  const perGroup = `per group: ${each.join(', ')} (${group.slotsInUse} group slots in use)`
  return text === '' ? perGroup : `${text}; ${perGroup}`
}

/** Settings as `completed 1 d, failed 7 d, maxCompleted 1000` (a name ending in Ms is a duration; null is unset). */
function summary(value: Record<string, unknown> | null, fallback: string): string {
  const parts = Object.entries(value ?? {})
    .filter(([, inner]) => inner !== null && inner !== undefined)
    .map(([name, inner]) =>
      name.endsWith('Ms') && typeof inner === 'number'
        ? `${name.slice(0, -2)} ${duration(inner)}`
        : `${name} ${typeof inner === 'string' ? inner : JSON.stringify(inner)}`,
    )
  return parts.length === 0 ? fallback : parts.join(', ')
}
