// Hash routing (`#/jobs?queue=q&state=failed`, `#/jobs/123`): links are plain anchors and any basePath works.
import { useEffect, useState } from 'preact/hooks'

export const VIEWS = ['queues', 'jobs', 'job', 'failed', 'keys', 'effects', 'schedulers'] as const
export type View = (typeof VIEWS)[number]

export interface Route {
  view: View
  /** The job's id on `#/jobs/:id`. */
  id?: string
  params: URLSearchParams
}

/** The route of a hash; an unknown one shows the queues. */
export function parseHash(hash: string): Route {
  const [path = '', search = ''] = hash.replace(/^#\/?/, '').split('?', 2)
  const params = new URLSearchParams(search)
  const [first, second] = path.split('/')
  if (first === 'jobs' && second) return { view: 'job', id: decodeURIComponent(second), params }
  const view = VIEWS.find((name) => name === first && name !== 'job')
  return { view: view ?? 'queues', params }
}

/** `#/view?…` with the non-empty parameters. */
export function href(path: string, params: Record<string, string | undefined> = {}): string {
  const search = new URLSearchParams()
  for (const [name, value] of Object.entries(params)) if (value) search.set(name, value)
  const text = search.toString()
  return `#/${path}${text ? `?${text}` : ''}`
}

/** The current route, following `hashchange`. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash))
  useEffect(() => {
    const follow = (): void => setRoute(parseHash(location.hash))
    addEventListener('hashchange', follow)
    return () => removeEventListener('hashchange', follow)
  }, [])
  return route
}

/** A search form's submit handler: its named fields, trimmed, become the hash of `view` (so Back works). */
export function submitTo(view: string, names: string[]): (event: SubmitEvent) => void {
  return (event) => {
    event.preventDefault()
    const form = new FormData(event.currentTarget as HTMLFormElement)
    const params: Record<string, string | undefined> = {}
    for (const name of names) params[name] = (form.get(name) as string | null)?.trim() || undefined
    location.hash = href(view, params)
  }
}
