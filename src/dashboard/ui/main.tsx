// The dashboard's page: a skip link, the navigation, the view of the current hash route, the line reporting actions.
import { render, type JSX } from 'preact'
import { useEffect, useMemo, useRef, useState } from 'preact/hooks'
import { call, type Config } from './api.js'
import { SharedContext } from './context.js'
import { useRoute, type Route, type View } from './route.js'
import { EffectsView } from './views/effects.js'
import { FailedView } from './views/failed.js'
import { JobView } from './views/job.js'
import { JobsView } from './views/jobs.js'
import { KeysView } from './views/keys.js'
import { QueuesView } from './views/queues.js'
import { SchedulersView } from './views/schedulers.js'

const NAV: { view: View; label: string }[] = [
  { view: 'queues', label: 'Queues' },
  { view: 'jobs', label: 'Jobs' },
  { view: 'failed', label: 'Failed' },
  { view: 'keys', label: 'Dedup keys' },
  { view: 'effects', label: 'Effects' },
  { view: 'schedulers', label: 'Schedulers' },
]

function App(): JSX.Element {
  const route = useRoute()
  const [config, setConfig] = useState<Config | undefined>(undefined)
  const [notice, setNotice] = useState<{ text: string; ok: boolean } | undefined>(undefined)
  useEffect(() => {
    call<Config>('config').then(setConfig, (error: Error) => setNotice({ text: error.message, ok: false }))
  }, [])
  const shared = useMemo(() => ({ config, notify: (text: string, ok: boolean) => setNotice({ text, ok }) }), [config])
  const main = useRef<HTMLElement>(null)
  const first = useRef(true)
  const path = location.hash
  useEffect(() => {
    // A new view moves the keyboard to its title (not on the first load: the page starts at the skip link).
    if (first.current) first.current = false
    else document.getElementById('view-title')?.focus()
    setNotice(undefined)
  }, [path])
  const current = route.view === 'job' ? 'jobs' : route.view
  return (
    <SharedContext.Provider value={shared}>
      <a
        class="skip"
        href="#main"
        onClick={(event) => {
          event.preventDefault()
          main.current?.focus()
        }}
      >
        Skip to content
      </a>
      <header>
        <span class="brand">pgonce</span>
        <nav aria-label="Views">
          {NAV.map(({ view, label }) => (
            <a key={view} href={`#/${view}`} aria-current={current === view ? 'page' : undefined}>
              {label}
            </a>
          ))}
        </nav>
        {config?.readOnly && <span class="badge">read-only</span>}
      </header>
      <main id="main" ref={main} tabIndex={-1}>
        {/* Always in the page, empty when there is nothing to say: a live region that appears is not read out. */}
        <p class={notice ? `notice ${notice.ok ? 'ok' : 'error'}` : 'quiet'} role="status">
          {notice?.text}
        </p>
        <Page route={route} />
      </main>
    </SharedContext.Provider>
  )
}

function Page({ route }: { route: Route }): JSX.Element {
  switch (route.view) {
    case 'job':
      return <JobView key={route.id} id={route.id ?? ''} />
    case 'jobs':
      return <JobsView route={route} />
    case 'failed':
      return <FailedView />
    case 'keys':
      return <KeysView route={route} />
    case 'effects':
      return <EffectsView route={route} />
    case 'schedulers':
      return <SchedulersView />
    default:
      return <QueuesView />
  }
}

render(<App />, document.getElementById('app')!)
