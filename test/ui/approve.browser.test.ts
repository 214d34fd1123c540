/**
 * The approval buttons of the live page in headless chromium: a note typed and Reject sends the
 * draft back with it, Approve finishes the run; a page of another origin in the same browser
 * that posts to `/approve` (with the token, even) is refused, and the approval still waits.
 * Skipped, saying so, without /usr/bin/chromium (fails instead under SWARMSTATE_REQUIRE_ALL=1).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, startLiveUi, type RunEvent } from '../../src/index.js';
import { launchChromium, skipWithoutChromium, watchPage } from '../helpers/browser.js';
import { until } from '../helpers/cli.js';

const skip = skipWithoutChromium('the approval buttons browser test');

const plan = {
  providers: { sim: { type: 'sim' } },
  models: { fast: { provider: 'sim', model: 'sim-fast' } },
  tasks: [
    { id: 'draft', model: 'fast', prompt: 'draft a reply [[sim:reply DRAFT]]' },
    { id: 'ok', kind: 'approval', approves: 'draft', prompt: 'Send this reply?' },
    { id: 'send', model: 'fast', deps: ['ok', 'draft'], prompt: 'send {{draft}} [[sim:reply SENT]]' },
  ],
};

describe.skipIf(skip)('approving on the live page in chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('Reject with a note, then Approve; a page of another origin cannot decide', async () => {
    const swarm = createSwarm({ seed: 1, store: false });
    const run = swarm.run(plan, { holdApprovals: true });
    const events: RunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as RunEvent));
    const ui = await startLiveUi({ run, holdsApprovals: true });
    // Another site on this machine, which knows the URL with its token.
    const evil: Server = createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/html' }).end('<html><body>elsewhere</body></html>'));
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    try {
      const asked = () => events.filter((e) => e.type === 'approval:requested').length;
      const decided = () => events.filter((e): e is Extract<RunEvent, { type: 'approval:decided' }> => e.type === 'approval:decided');
      await until(() => asked() === 1, 'the approval to wait');

      const other = await browser.newPage();
      await other.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      const target = ui.url.replace('/?', '/approve?');
      const tried = await other.evaluate(async (url) => {
        const out: string[] = [];
        // A simple request (no preflight): it reaches the server, with the browser's Origin.
        try {
          await fetch(url, { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body: '{"taskId":"ok","approved":true}' });
          out.push('simple: sent');
        } catch {
          out.push('simple: failed');
        }
        // JSON asks first (a preflight), which the server does not grant.
        try {
          await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"taskId":"ok","approved":true}' });
          out.push('json: answered');
        } catch {
          out.push('json: blocked');
        }
        return out;
      }, target);
      expect(tried).toEqual(['simple: sent', 'json: blocked']);
      expect(decided()).toEqual([]);
      await other.close();

      const page = await browser.newPage();
      const { problems } = watchPage(page);
      await page.goto(ui.url);
      const form = page.locator('.approve-form[data-task="ok"]');
      await form.waitFor();
      expect(await page.locator('#approvals h3').first().innerText()).toBe('ok waits: Send this reply?');
      await form.locator('textarea').fill('too long');
      await form.locator('button', { hasText: 'Reject' }).click();
      await page.locator('#approval-msg', { hasText: 'rejected ok' }).waitFor();
      await until(() => asked() === 2, 'the second round');
      // The second round's form, once the new view is in.
      await page.locator('#approvals h3', { hasText: 'round 2 of 2' }).waitFor();
      await page.locator('.approve-form[data-task="ok"] button', { hasText: 'Approve' }).click();
      const result = await run.result;
      expect(result.status).toBe('completed');
      expect(decided().map((d) => [d.by, d.outcome, d.note ?? null])).toEqual([
        ['ui', 'revise', 'too long'],
        ['ui', 'approved', null],
      ]);
      // The finished page has no buttons, and each decision has its row.
      await page.locator('#live', { hasText: 'finished' }).waitFor();
      expect(await page.locator('.approve-form').count()).toBe(0);
      expect(await page.locator('#approvals tbody tr').count()).toBe(2);
      expect(problems).toEqual([]);
      await page.close();
    } finally {
      await ui.close();
      await swarm.close();
      await new Promise<void>((resolve) => evil.close(() => resolve()));
    }
  });
});
