// Job schedulers: pattern or interval, next and last tick, and "run now".
import type { JSX } from 'preact'
import { call, type Scheduler } from '../api.js'
import { ActionButton, Cell, Heading, PollStatus, Time } from '../components.js'
import { duration } from '../format.js'
import { usePoll } from '../poll.js'
import { Table } from '../table.js'

export function SchedulersView(): JSX.Element {
  const polled = usePoll<{ schedulers: Scheduler[] }>('schedulers')
  const schedulers = polled.data?.schedulers ?? []
  return (
    <section aria-labelledby="view-title">
      <Heading>Schedulers</Heading>
      <PollStatus polled={polled} />
      <Table
        columns={['Queue', 'Id', 'Repeats', 'Job name', 'Next tick', 'Last tick', 'Actions']}
        rows={schedulers}
        loaded={polled.data !== undefined}
        empty="No scheduler."
        row={(scheduler) => (
          <tr key={`${scheduler.queue}\u0000${scheduler.id}`}>
            <Cell label="Queue">{scheduler.queue}</Cell>
            <Cell label="Id">{scheduler.id}</Cell>
            <Cell label="Repeats">
              {scheduler.pattern ? (
                <>
                  <code>{scheduler.pattern}</code>
                  {scheduler.tz && <span class="muted"> {scheduler.tz}</span>}
                </>
              ) : (
                `every ${duration(scheduler.everyMs ?? 0)}`
              )}
            </Cell>
            <Cell label="Job name">{scheduler.name}</Cell>
            <Cell label="Next tick">
              <Time at={scheduler.nextRunAt} />
            </Cell>
            <Cell label="Last tick">
              <Time at={scheduler.lastRunAt} empty="never" />
            </Cell>
            <Cell label="Actions">
              <ActionButton action="runScheduler" run={() => runNow(scheduler)} done={polled.reload}>
                Run now
              </ActionButton>
            </Cell>
          </tr>
        )}
      />
    </section>
  )
}

async function runNow(scheduler: Scheduler): Promise<string> {
  const path = `schedulers/${encodeURIComponent(scheduler.queue)}/${encodeURIComponent(scheduler.id)}/run`
  const { jobId } = await call<{ jobId: string | null }>(path, 'POST')
  return jobId ? `Scheduler ${scheduler.id} added job #${jobId}` : `Scheduler ${scheduler.id} added no job`
}
