// Debian's Chromium driven by playwright-core (never a browser Playwright downloads), shared by the dashboard's browser
// test and dev/dashboard-screenshots.ts; .ci/run installs /usr/bin/chromium when missing.

import { chromium, type Browser } from 'playwright-core'

export const CHROMIUM = '/usr/bin/chromium'

/** Headless Chromium with no network of its own (no sync, updates or background fetches). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    timeout: 30_000,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
}
