// Who may act: read-only refuses every action, a cross-site browser request is refused, then `can` decides.

import type { DashboardAction, DashboardRequest, ResolvedOptions } from './options.js'
import { DASHBOARD_ACTIONS } from './options.js'
import { ApiError } from './http-error.js'

/**
 * A browser's request from another site: its `Sec-Fetch-Site` says so, or its `Origin` names another host than the
 * `Host` it was sent to. A client that sends neither (curl, a script) is not a browser a page could have made act.
 */
export function isCrossSite(headers: Headers): boolean {
  const site = headers.get('sec-fetch-site')
  if (site !== null && site !== 'same-origin' && site !== 'none') return true
  const origin = headers.get('origin')
  if (origin === null) return false
  let host: string
  try {
    host = new URL(origin).host
  } catch {
    return true // 'null' (a sandboxed frame, a file:// page) or garbage
  }
  return host !== headers.get('host')
}

async function asks(opts: ResolvedOptions, action: DashboardAction, req: DashboardRequest): Promise<boolean> {
  if (opts.readOnly) return false
  if (opts.can === undefined) return true
  try {
    return (await opts.can(action, req)) === true
  } catch (err) {
    opts.logger.error({ err, action }, 'pgonce dashboard: can() threw; the action is refused')
    return false
  }
}

/** Throws the refusals that do not depend on the action: read-only, cross-site. */
export function refuseEarly(opts: ResolvedOptions, headers: Headers): void {
  if (opts.readOnly) throw new ApiError('READ_ONLY', 'this dashboard is read-only')
  if (isCrossSite(headers)) throw new ApiError('CROSS_SITE', 'a cross-site request may not act')
}

/** Throws the refusal of `action` for this request, if any (before anything is read or changed). */
export async function authorize(
  opts: ResolvedOptions,
  action: DashboardAction,
  req: DashboardRequest,
  headers: Headers,
): Promise<void> {
  refuseEarly(opts, headers)
  if (!(await asks(opts, action, req))) throw new ApiError('FORBIDDEN', `not allowed: ${action}`)
}

/** What this request may do, for api/config (the UI hides what is false). */
export async function permissions(opts: ResolvedOptions, req: DashboardRequest) {
  const actions = {} as Record<DashboardAction, boolean>
  for (const a of DASHBOARD_ACTIONS) actions[a] = await asks(opts, a, req)
  return { readOnly: opts.readOnly, actions }
}
