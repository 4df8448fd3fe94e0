// Held dedup keys: owner, owner's state, expiry or "until the owner finishes", age; a lookup by key answers "why was
// my add deduplicated?".
import type { JSX } from 'preact'
import { call, query, type HeldKey, type Page } from '../api.js'
import { ActionButton, Cell, Heading, JobLink, PollStatus, StateBadge, Time } from '../components.js'
import { duration } from '../format.js'
import { usePoll } from '../poll.js'
import { submitTo, type Route } from '../route.js'
import { Pager, Table } from '../table.js'

export function KeysView({ route }: { route: Route }): JSX.Element {
  const queue = route.params.get('queue') ?? undefined
  const search = route.params.get('search') ?? undefined
  const after = route.params.get('after') ?? undefined
  const polled = usePoll<{ keys: HeldKey[] } & Page>(`keys${query({ queue, search, after })}`)
  const keys = polled.data?.keys ?? []
  const onSubmit = submitTo('keys', ['queue', 'search'])
  const exact = search !== undefined && !search.endsWith('*')
  return (
    <section aria-labelledby="view-title">
      <Heading>Dedup keys</Heading>
      <form class="filters" role="search" key={`${queue}|${search}`} onSubmit={onSubmit}>
        <label>
          Queue
          <input name="queue" defaultValue={queue ?? ''} placeholder="all" />
        </label>
        <label class="grow">
          Key
          <input name="search" type="search" defaultValue={search ?? ''} placeholder="a key, or a prefix: abc*" />
        </label>
        <button type="submit">Look up</button>
      </form>
      <PollStatus polled={polled} />
      {polled.data && keys.length === 0 && (
        <p class="notice info" role="status">
          {exact
            ? `No job holds the key "${search}"${queue ? ` in ${queue}` : ''}: an add with it is not deduplicated now.`
            : 'No key is held.'}
        </p>
      )}
      {exact && keys.length > 0 && (
        <p class="notice info" role="status">
          Why an add with this key is deduplicated: job <JobLink id={keys[0]!.ownerId} /> ({keys[0]!.ownerState}) holds
          it{' '}
          {keys[0]!.expiresAt ? (
            <>
              until <Time at={keys[0]!.expiresAt} />
            </>
          ) : (
            'until it finishes'
          )}
          .
        </p>
      )}
      <Table
        columns={['Queue', 'Key', 'Owner', "Owner's state", 'Expires', 'Age', 'Actions']}
        rows={keys}
        loaded={polled.data !== undefined && keys.length > 0}
        empty=""
        row={(key) => (
          <tr key={`${key.queue}\u0000${key.key}`}>
            <Cell label="Queue">{key.queue}</Cell>
            <Cell label="Key">
              <code>{key.key}</code>
            </Cell>
            <Cell label="Owner">
              <JobLink id={key.ownerId} /> {key.ownerName}
            </Cell>
            <Cell label="Owner's state">
              <StateBadge state={key.ownerState} />
            </Cell>
            <Cell label="Expires">
              <Time at={key.expiresAt} empty="until the owner finishes" />
            </Cell>
            <Cell label="Age">{duration(key.ageMs)}</Cell>
            <Cell label="Actions">
              <ActionButton
                action="removeKey"
                danger
                confirm={`Remove the key "${key.key}"? An add with it will no longer be deduplicated.`}
                run={() => removeKey(key)}
                done={polled.reload}
              >
                Remove key
              </ActionButton>
            </Cell>
          </tr>
        )}
      />
      <Pager view="keys" params={{ queue, search }} after={after} next={polled.data?.next} />
    </section>
  )
}

async function removeKey(key: HeldKey): Promise<string> {
  const { removed } = await call<{ removed: boolean }>(
    `keys/${encodeURIComponent(key.queue)}/${encodeURIComponent(key.key)}`,
    'DELETE',
  )
  return removed ? `Key ${key.key} removed` : `Key ${key.key} was no longer held`
}
