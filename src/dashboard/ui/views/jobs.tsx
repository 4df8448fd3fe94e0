// Jobs by queue and state, searched by id, jobId, dedup key or JSON containment on data, paged by keyset; many
// selected can be retried, cancelled, promoted or removed at once.
import type { JSX } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { call, query, STATES, type JobAction, type JobSummary, type Page, type QueueInfo } from '../api.js'
import { ActionButton, Cell, Heading, JobLink, PollStatus, StateBadge, Time } from '../components.js'
import { usePoll } from '../poll.js'
import { href, submitTo, type Route } from '../route.js'
import { Pager, Table } from '../table.js'

const BULK: { action: JobAction; label: string }[] = [
  { action: 'retry', label: 'Retry' },
  { action: 'promote', label: 'Promote' },
  { action: 'cancel', label: 'Cancel' },
  { action: 'remove', label: 'Remove' },
]

export function JobsView({ route }: { route: Route }): JSX.Element {
  const filter = {
    queue: route.params.get('queue') ?? undefined,
    state: route.params.get('state') ?? undefined,
    search: route.params.get('search') ?? undefined,
  }
  const after = route.params.get('after') ?? undefined
  // A page's size (`#/jobs?limit=200`) is kept from page to page; the API's default is 50.
  const limit = route.params.get('limit') ?? undefined
  const polled = usePoll<{ jobs: JobSummary[] } & Page>(`jobs${query({ ...filter, limit, after })}`)
  const jobs = polled.data?.jobs ?? []
  const [selected, setSelected] = useState<Set<string>>(new Set())
  useEffect(() => setSelected(new Set()), [route.params.toString()])
  const toggle = (id: string): void => {
    const next = new Set(selected)
    if (!next.delete(id)) next.add(id)
    setSelected(next)
  }
  const all = jobs.length > 0 && jobs.every((job) => selected.has(job.id))
  return (
    <section aria-labelledby="view-title">
      <Heading>Jobs</Heading>
      <JobsFilter key={JSON.stringify(filter)} {...filter} />
      <div class="toolbar" role="group" aria-label="Actions on the selected jobs">
        <span class="muted">{selected.size} selected</span>
        {BULK.map(({ action, label }) => (
          <ActionButton
            key={action}
            action={action}
            disabled={selected.size === 0}
            danger={action === 'remove'}
            confirm={action === 'remove' ? `Remove ${selected.size} job(s) for good?` : undefined}
            run={() => bulk(action, [...selected])}
            done={() => {
              setSelected(new Set())
              polled.reload()
            }}
          >
            {label} selected
          </ActionButton>
        ))}
      </div>
      <PollStatus polled={polled} />
      <Table
        columns={[
          <input
            type="checkbox"
            aria-label="Select every job on this page"
            checked={all}
            onChange={() => setSelected(all ? new Set() : new Set(jobs.map((job) => job.id)))}
          />,
          'Id',
          'Queue',
          'Name',
          'State',
          'jobId / key',
          'Attempts',
          'Created',
          'Last error',
        ]}
        rows={jobs}
        loaded={polled.data !== undefined}
        empty={
          polled.data?.next ? 'No match among the jobs this page read; the next page reads on.' : 'No job matches.'
        }
        row={(job) => (
          <tr key={job.id}>
            <Cell label="Select">
              <input
                type="checkbox"
                aria-label={`Select job ${job.id}`}
                checked={selected.has(job.id)}
                onChange={() => toggle(job.id)}
              />
            </Cell>
            <Cell label="Id">
              <JobLink id={job.id} />
            </Cell>
            <Cell label="Queue">{job.queue}</Cell>
            <Cell label="Name">{job.name}</Cell>
            <Cell label="State">
              <StateBadge state={job.state} />
            </Cell>
            <Cell label="jobId / key">
              {job.jobId ?? ''}
              {job.jobId && job.dedupKey ? ' / ' : ''}
              {job.dedupKey && <a href={href('keys', { queue: job.queue, search: job.dedupKey })}>{job.dedupKey}</a>}
            </Cell>
            <Cell label="Attempts">
              {job.attempts}/{job.maxAttempts}
            </Cell>
            <Cell label="Created">
              <Time at={job.createdAt} />
            </Cell>
            <Cell label="Last error">
              <span class="error-text">{job.lastError ?? ''}</span>
            </Cell>
          </tr>
        )}
      />
      <Pager view="jobs" params={{ ...filter, limit }} after={after} next={polled.data?.next} />
    </section>
  )
}

async function bulk(action: JobAction, ids: string[]): Promise<string> {
  const { results } = await call<{ results: { id: string; ok: boolean; error?: { message: string } }[] }>(
    'jobs/actions',
    'POST',
    { action, ids },
  )
  const failed = results.filter((result) => !result.ok)
  const done = `${action}: ${results.length - failed.length} of ${results.length} done`
  if (failed.length === 0) return done
  return `${done}; ${failed.map((result) => `#${result.id}: ${result.error?.message ?? 'refused'}`).join('; ')}`
}

/** The filter form; submitting it changes the hash (so the view is a link, and Back works). */
function JobsFilter(props: { queue?: string; state?: string; search?: string }): JSX.Element {
  // Inputs keep what is typed (defaultValue, selected): the view re-renders on every poll. A new route remounts the form.
  // The queues' names once per form, not polled: api/queues counts every queue, more than a list of names needs.
  const [queues, setQueues] = useState<QueueInfo[]>([])
  useEffect(() => {
    call<{ queues: QueueInfo[] }>('queues').then(
      (answer) => setQueues(answer.queues),
      () => undefined, // the form still offers "all" and the queue of the route
    )
  }, [])
  const names = new Set([...(props.queue ? [props.queue] : []), ...queues.map((queue) => queue.name)])
  const onSubmit = submitTo('jobs', ['queue', 'state', 'search'])
  return (
    <form class="filters" role="search" onSubmit={onSubmit}>
      <label>
        Queue
        <select name="queue">
          <option value="">all</option>
          {[...names].map((name) => (
            <option key={name} selected={name === props.queue}>
              {name}
            </option>
          ))}
        </select>
      </label>
      <label>
        State
        <select name="state">
          <option value="">all</option>
          {STATES.map((state) => (
            <option key={state} selected={state === props.state}>
              {state}
            </option>
          ))}
        </select>
      </label>
      <label class="grow">
        Search
        <input
          name="search"
          type="search"
          defaultValue={props.search ?? ''}
          placeholder='id, jobId, dedup key or {"json": "in data"}'
        />
      </label>
      <button type="submit">Search</button>
    </form>
  )
}
