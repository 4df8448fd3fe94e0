// One job: why it waits, its actions, data, result, progress, attempts and error with stack, timeline, dependencies,
// the dedup key it holds and its recorded effects.
import type { ComponentChildren, JSX } from 'preact'
import { call, type JobAction, type JobDetail, type JobRef } from '../api.js'
import { ActionButton, Heading, JobLink, JsonBlock, PollStatus, StateBadge, Time } from '../components.js'
import { usePoll } from '../poll.js'
import { href } from '../route.js'

const PENDING = ['waiting', 'delayed', 'waiting-children']
const ACTIONS: { action: JobAction; label: string; when: (state: string) => boolean }[] = [
  { action: 'retry', label: 'Retry', when: (state) => state === 'failed' || state === 'cancelled' },
  { action: 'promote', label: 'Promote', when: (state) => state === 'delayed' },
  { action: 'cancel', label: 'Cancel', when: (state) => PENDING.includes(state) || state === 'active' },
  { action: 'remove', label: 'Remove', when: () => true },
]

export function JobView({ id }: { id: string }): JSX.Element {
  const polled = usePoll<{ job: JobDetail }>(`jobs/${encodeURIComponent(id)}`)
  const job = polled.data?.job
  return (
    <section aria-labelledby="view-title">
      <Heading>
        Job #{id} {job && <StateBadge state={job.state} />}
      </Heading>
      <PollStatus polled={polled} />
      {job && <JobBody job={job} reload={polled.reload} />}
    </section>
  )
}

function JobBody({ job, reload }: { job: JobDetail; reload: () => void }): JSX.Element {
  return (
    <>
      {job.waitsFor.length > 0 && (
        <div class="notice info" aria-label="Why it waits">
          <strong>Why it waits:</strong>
          <ul>
            {job.waitsFor.map((wait, index) => (
              <li key={index}>
                {wait.reason}: {wait.detail} {wait.until && <Time at={wait.until} />}
              </li>
            ))}
          </ul>
        </div>
      )}
      <div class="toolbar" role="group" aria-label="Actions on this job">
        {ACTIONS.filter(({ when }) => when(job.state)).map(({ action, label }) => (
          <ActionButton
            key={action}
            action={action}
            danger={action === 'remove'}
            confirm={action === 'remove' ? `Remove job #${job.id} for good?` : undefined}
            run={async () => {
              await call(`jobs/${encodeURIComponent(job.id)}/${action}`, 'POST')
              return `Job #${job.id}: ${action} done`
            }}
            done={reload}
          >
            {label}
          </ActionButton>
        ))}
      </div>
      <dl class="facts">
        <Fact term="Queue">
          <a href={href('jobs', { queue: job.queue })}>{job.queue}</a>
        </Fact>
        <Fact term="Name">{job.name}</Fact>
        <Fact term="jobId">{job.jobId ?? '—'}</Fact>
        <Fact term="Priority">{job.priority}</Fact>
        <Fact term="Attempts">
          {job.attempts} of {job.maxAttempts}
        </Fact>
        <Fact term="Created">
          <Time at={job.createdAt} />
        </Fact>
        <Fact term="Runs at">
          <Time at={job.runAt} />
        </Fact>
        <Fact term="Started">
          <Time at={job.startedAt} />
        </Fact>
        <Fact term="Finished">
          <Time at={job.finishedAt} />
        </Fact>
        {(job.stalls ?? 0) > 0 && <Fact term="Stalls">{job.stalls}</Fact>}
        {job.state === 'active' && job.lockedBy && (
          <Fact term="Locked by">
            {job.lockedBy} until <Time at={job.lockedUntil} />
          </Fact>
        )}
        {job.cancelRequestedAt && (
          <Fact term="Cancel requested">
            <Time at={job.cancelRequestedAt} />
          </Fact>
        )}
      </dl>
      {job.lastError && (
        <section aria-label="Error">
          <h2>Error</h2>
          <p class="error-text">{job.lastError}</p>
          {job.errorStack && (
            <pre class="stack-trace" tabIndex={0} aria-label="Stack trace">
              {job.errorStack}
            </pre>
          )}
        </section>
      )}
      <div class="columns">
        <section aria-label="Data">
          <h2>Data</h2>
          <JsonBlock value={job.data} label="Data" />
        </section>
        <section aria-label="Result and progress">
          <h2>Result</h2>
          <JsonBlock value={job.result} label="Result" />
          <h2>Progress</h2>
          <JsonBlock value={job.progress} label="Progress" />
        </section>
      </div>
      <section aria-label="Timeline">
        <h2>Timeline</h2>
        <ol class="timeline">
          {job.timeline.map((entry, index) => (
            <li key={index}>
              <Time at={entry.at} /> <strong>{entry.event}</strong>
              {entry.detail && <span class="muted"> {entry.detail}</span>}
            </li>
          ))}
        </ol>
      </section>
      <JobMeta job={job} />
    </>
  )
}

/** Dependencies, the key the job holds, its effects. */
function JobMeta({ job }: { job: JobDetail }): JSX.Element {
  const { parents, children } = job.dependencies
  return (
    <div class="columns">
      <section aria-label="Dependencies">
        <h2>Dependencies</h2>
        <Refs title="Parents" refs={parents} />
        <Refs title="Children" refs={children} />
      </section>
      <section aria-label="Dedup key">
        <h2>Dedup key</h2>
        {job.key ? (
          <p>
            <a href={href('keys', { queue: job.queue, search: job.key.key })}>{job.key.key}</a>{' '}
            {job.key.held ? 'held' : 'not held'}
            {job.key.held &&
              (job.key.expiresAt ? (
                <>
                  , expires <Time at={job.key.expiresAt} />
                </>
              ) : (
                ' until this job finishes'
              ))}
          </p>
        ) : (
          <p class="muted">None.</p>
        )}
        <h2 id="job-effects">Effects</h2>
        {job.effects.length === 0 ? (
          <p class="muted">
            None recorded by this job's handler; the whole ledger is under <a href="#/effects">Effects</a>.
          </p>
        ) : (
          <ul aria-labelledby="job-effects">
            {job.effects.map((effect) => (
              <li key={effect.key}>
                <code>{effect.key}</code> <Time at={effect.recordedAt} />
              </li>
            ))}
          </ul>
        )}
      </section>
    </div>
  )
}

function Refs({ title, refs }: { title: string; refs: JobRef[] }): JSX.Element {
  return (
    <>
      <h3>{title}</h3>
      {refs.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <ul>
          {refs.map((ref) => (
            <li key={ref.id}>
              <JobLink id={ref.id} /> {ref.name} <StateBadge state={ref.state} />
            </li>
          ))}
        </ul>
      )}
    </>
  )
}

function Fact({ term, children }: { term: string; children: ComponentChildren }): JSX.Element {
  return (
    <div>
      <dt>{term}</dt>
      <dd>{children}</dd>
    </div>
  )
}
