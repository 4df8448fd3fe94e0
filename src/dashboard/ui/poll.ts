// Live updates: the view's API answer fetched again every 2 s while the tab is visible, without reloading the page.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks'
import { call } from './api.js'

/** The contract's polling period (docs/dashboard.md). */
export const POLL_MS = 2_000

export interface Polled<T> {
  /** The latest answer for `path`, undefined until the first one arrives. */
  data: T | undefined
  /** The last call's error message, cleared by the next answer. */
  error: string | undefined
  /** Fetches now (after an action), without waiting for the next tick. */
  reload: () => void
}

/** Polls `api/<path>`; a new path drops the old answer so that a view never shows another route's data. */
export function usePoll<T>(path: string): Polled<T> {
  const [state, setState] = useState<{ path: string; data?: T; error?: string }>({ path })
  const generation = useRef(0)
  const timer = useRef<number | undefined>(undefined)

  const fetchNow = useCallback(() => {
    const mine = ++generation.current
    clearTimeout(timer.current)
    call<T>(path)
      .then(
        (data) => mine === generation.current && setState({ path, data }),
        (error: Error) => mine === generation.current && setState((old) => ({ ...old, path, error: error.message })),
      )
      .finally(() => {
        // Hidden tabs stop polling; visibilitychange starts again.
        if (mine === generation.current && document.visibilityState === 'visible') {
          timer.current = window.setTimeout(fetchNow, POLL_MS)
        }
      })
  }, [path])

  useEffect(() => {
    fetchNow()
    const onVisibility = (): void => {
      if (document.visibilityState === 'visible') fetchNow()
    }
    document.addEventListener('visibilitychange', onVisibility)
    return () => {
      generation.current++
      clearTimeout(timer.current)
      document.removeEventListener('visibilitychange', onVisibility)
    }
  }, [fetchNow])

  const current = state.path === path
  return { data: current ? state.data : undefined, error: current ? state.error : undefined, reload: fetchNow }
}
