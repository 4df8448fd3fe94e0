// Small pieces every view uses: times, states, JSON, an action button, a polled answer's loading and error lines.
import type { ComponentChildren, JSX } from 'preact'
import { useState } from 'preact/hooks'
import type { Action } from './api.js'
import { useAllowed, useShared } from './context.js'
import { json, relative, stamp } from './format.js'
import type { Polled } from './poll.js'

/** A time as `5 min ago`, its exact value in `datetime` and the tooltip; a dash when absent. */
export function Time({ at, empty = '—' }: { at: string | null | undefined; empty?: string }): JSX.Element {
  if (!at) return <span class="muted">{empty}</span>
  return (
    <time dateTime={at} title={stamp(at)}>
      {relative(at)}
    </time>
  )
}

export function StateBadge({ state }: { state: string }): JSX.Element {
  return <span class={`badge state-${state}`}>{state}</span>
}

export function JsonBlock({ value, label }: { value: unknown; label: string }): JSX.Element {
  return (
    <pre class="json" tabIndex={0} aria-label={label}>
      {json(value)}
    </pre>
  )
}

/** A job's link: `#123` to its page. */
export function JobLink({ id }: { id: string | null }): JSX.Element {
  if (!id) return <span class="muted">—</span>
  return <a href={`#/jobs/${encodeURIComponent(id)}`}>#{id}</a>
}

export interface ActionProps {
  /** The permission the server checks; the button is not shown when api/config says no. */
  action: Action
  children: ComponentChildren
  /** Performs the call and answers the line to report. */
  run: () => Promise<string>
  /** Runs after the call, ok or not (a view reloads its data). */
  done?: () => void
  /** Asks before a destructive action. */
  confirm?: string
  danger?: boolean
  disabled?: boolean
}

/** A real button for one action, hidden when not allowed, busy while its call runs; reports the outcome. */
export function ActionButton(props: ActionProps): JSX.Element | null {
  const allowed = useAllowed(props.action)
  const { notify } = useShared()
  const [busy, setBusy] = useState(false)
  if (!allowed) return null
  const onClick = (): void => {
    if (props.confirm && !window.confirm(props.confirm)) return
    setBusy(true)
    props
      .run()
      .then(
        (text) => notify(text, true),
        (error: Error) => notify(error.message, false),
      )
      .finally(() => {
        setBusy(false)
        props.done?.()
      })
  }
  return (
    <button
      type="button"
      class={props.danger ? 'danger' : undefined}
      disabled={busy || props.disabled}
      aria-busy={busy}
      onClick={onClick}
    >
      {props.children}
    </button>
  )
}

/** The loading line, or the error of the last poll (kept beside the last good data, which stays shown). */
export function PollStatus<T>({ polled }: { polled: Polled<T> }): JSX.Element | null {
  if (polled.error) {
    return (
      <p class="notice error" role="alert">
        {polled.error}
      </p>
    )
  }
  if (polled.data === undefined) return <p class="muted">Loading…</p>
  return null
}

/** Completions per minute over the last hour as bars; SVG attributes only (the CSP allows no inline style). */
export function Sparkline({ values, label }: { values: number[]; label: string }): JSX.Element {
  const max = Math.max(1, ...values)
  return (
    <svg class="spark" viewBox={`0 0 ${values.length * 3} 20`} preserveAspectRatio="none" role="img" aria-label={label}>
      {values.map((value, index) => {
        const height = value === 0 ? 0 : Math.max(1, (value / max) * 20)
        return <rect key={index} x={index * 3} y={20 - height} width={2} height={height} />
      })}
    </svg>
  )
}

/** A table cell whose label shows above its value when the table stacks on a narrow screen. */
export function Cell({ label, children }: { label: string; children: ComponentChildren }): JSX.Element {
  return <td data-label={label}>{children}</td>
}

/** A page's title; focused on a route change so that a screen reader and the keyboard start there. */
export function Heading({ children }: { children: ComponentChildren }): JSX.Element {
  return (
    <h1 id="view-title" tabIndex={-1}>
      {children}
    </h1>
  )
}
