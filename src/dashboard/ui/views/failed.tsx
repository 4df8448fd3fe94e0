// The failed set grouped by error message, with the jobs of each group to open or retry together.
import type { JSX } from 'preact'
import { call, type FailedGroup } from '../api.js'
import { ActionButton, Cell, Heading, JobLink, PollStatus, Time } from '../components.js'
import { usePoll } from '../poll.js'
import { href } from '../route.js'
import { Table } from '../table.js'

export function FailedView(): JSX.Element {
  const polled = usePoll<{ groups: FailedGroup[]; sampled?: string[]; sampleSize?: number }>('failed')
  const groups = polled.data?.groups ?? []
  const sampled = polled.data?.sampled ?? []
  return (
    <section aria-labelledby="view-title">
      <Heading>Failed jobs by error</Heading>
      <PollStatus polled={polled} />
      {sampled.length > 0 && (
        <p class="muted">
          Grouped from the newest {polled.data?.sampleSize ?? ''} failed jobs of {sampled.join(', ')}; the counts of
          those queues are of that sample.
        </p>
      )}
      <Table
        columns={['Queue', 'Error', 'Jobs', 'Last', 'Some of them', 'Actions']}
        rows={groups}
        loaded={polled.data !== undefined}
        empty="No failed job."
        row={(group) => (
          <tr key={`${group.queue}\u0000${group.error}`}>
            <Cell label="Queue">
              <a href={href('jobs', { queue: group.queue, state: 'failed' })}>{group.queue}</a>
            </Cell>
            <Cell label="Error">
              <span class="error-text">{group.error}</span>
            </Cell>
            <Cell label="Jobs">{group.count}</Cell>
            <Cell label="Last">
              <Time at={group.lastAt} />
            </Cell>
            <Cell label="Some of them">
              <span class="ids">
                {group.ids.map((id) => (
                  <JobLink key={id} id={id} />
                ))}
              </span>
            </Cell>
            <Cell label="Actions">
              <ActionButton action="retry" run={() => retryGroup(group)} done={polled.reload}>
                Retry these {group.ids.length}
              </ActionButton>
            </Cell>
          </tr>
        )}
      />
    </section>
  )
}

async function retryGroup(group: FailedGroup): Promise<string> {
  const { results } = await call<{ results: { ok: boolean }[] }>('jobs/actions', 'POST', {
    action: 'retry',
    ids: group.ids,
  })
  return `Retried ${results.filter((result) => result.ok).length} of ${results.length} jobs`
}
