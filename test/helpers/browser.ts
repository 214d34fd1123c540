/** Headless Chromium for the browser tests: Debian's package (`.ci/run` installs it), never a download. */
import { chromium, type Browser, type Page } from 'playwright-core';
import { skipWithout } from './programs.js';

export const CHROMIUM = '/usr/bin/chromium';

/** Whether a browser test file skips (and says why), or fails under SWARMSTATE_REQUIRE_ALL. */
export const skipWithoutChromium = (what: string): boolean => skipWithout(CHROMIUM, what, 'apt-get install -y chromium');

/** A headless browser with nothing running in the background (no updates, sync or other network). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/** What a page reports while a test drives it: console errors and uncaught exceptions, and every request it makes. */
export function watchPage(page: Page): { problems: string[]; requests: string[] } {
  const problems: string[] = [];
  const requests: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page: ${e.message}`));
  page.on('request', (r) => requests.push(r.url()));
  return { problems, requests };
}
