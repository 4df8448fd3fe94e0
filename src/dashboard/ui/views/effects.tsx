// The effects ledger (processed_effects) and the runOnce claims, searched by key.
import type { JSX } from 'preact'
import { query, type Claim, type Effect, type Page } from '../api.js'
import { Cell, Heading, JobLink, PollStatus, StateBadge, Time } from '../components.js'
import { usePoll } from '../poll.js'
import { submitTo, type Route } from '../route.js'
import { Pager, Table } from '../table.js'

export function EffectsView({ route }: { route: Route }): JSX.Element {
  const search = route.params.get('search') ?? undefined
  const after = route.params.get('after') ?? undefined
  const polled = usePoll<{ effects: Effect[]; claims: Claim[] } & Page>(`effects${query({ search, after })}`)
  const effects = polled.data?.effects ?? []
  const claims = polled.data?.claims ?? []
  // A ledger row names its job when a handler's ctx.effect recorded it (effects.record() outside a job: none), the claims
  // never: each column shows only when some row has a job.
  const effectsWithJob = effects.some((effect) => effect.jobId !== null)
  const claimsWithJob = claims.some((claim) => claim.jobId !== null)
  return (
    <section aria-labelledby="view-title">
      <Heading>Effects</Heading>
      <form class="filters" role="search" key={search} onSubmit={submitTo('effects', ['search'])}>
        <label class="grow">
          Key
          <input name="search" type="search" defaultValue={search ?? ''} placeholder="a key, or a prefix: abc*" />
        </label>
        <button type="submit">Search</button>
      </form>
      <PollStatus polled={polled} />
      <h2>Ledger</h2>
      <Table
        columns={effectsWithJob ? ['Key', 'Job', 'Recorded'] : ['Key', 'Recorded']}
        rows={effects}
        loaded={polled.data !== undefined}
        empty="No effect recorded."
        row={(effect) => (
          <tr key={effect.key}>
            <Cell label="Key">
              <code>{effect.key}</code>
            </Cell>
            {effectsWithJob && (
              <Cell label="Job">
                <JobLink id={effect.jobId} />
              </Cell>
            )}
            <Cell label="Recorded">
              <Time at={effect.recordedAt} />
            </Cell>
          </tr>
        )}
      />
      <Pager view="effects" params={{ search }} after={after} next={polled.data?.next} />
      <h2>runOnce claims</h2>
      <Table
        columns={claimsWithJob ? ['Key', 'State', 'Job', 'Expires'] : ['Key', 'State', 'Expires']}
        rows={claims}
        loaded={polled.data !== undefined}
        empty="No claim."
        row={(claim) => (
          <tr key={claim.key}>
            <Cell label="Key">
              <code>{claim.key}</code>
            </Cell>
            <Cell label="State">
              <StateBadge state={claim.state} />
              {claim.expired && <span class="badge">expired</span>}
            </Cell>
            {claimsWithJob && (
              <Cell label="Job">
                <JobLink id={claim.jobId} />
              </Cell>
            )}
            <Cell label="Expires">
              <Time at={claim.expiresAt} empty="never" />
            </Cell>
          </tr>
        )}
      />
    </section>
  )
}
