// pgonce/dashboard: the dashboard's request handler (docs/dashboard.md).

export { dashboard, type DashboardHandler } from './server/handler.js'
export type { DashboardAction, DashboardOptions, DashboardRequest } from './server/options.js'
