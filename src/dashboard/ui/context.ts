// What every view shares: what this request may do (api/config) and the line that reports an action's outcome.
import { createContext } from 'preact'
import { useContext } from 'preact/hooks'
import type { Action, Config } from './api.js'

export interface Shared {
  config: Config | undefined
  notify: (text: string, ok: boolean) => void
}

export const SharedContext = createContext<Shared>({ config: undefined, notify: () => undefined })

export function useShared(): Shared {
  return useContext(SharedContext)
}

/** Whether the server said this request may do `action`; false until api/config answers. */
export function useAllowed(action: Action): boolean {
  return useShared().config?.actions[action] === true
}
