/**
 * The live page of a real run (the embedded simulator over loopback HTTP) in headless chromium
 * through playwright-core. The run is held at a tool call the test releases, so "while the run
 * goes" is a state the test can see, not a race: the page shows the first tasks done and the
 * agent waiting on its tool, survives a reload, then shows the rest as they finish. Skipped, saying
 * so, without /usr/bin/chromium (fails instead under SWARMSTATE_REQUIRE_ALL=1).
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm, type RunResult, type TimedRunEvent } from '../../src/index.js';
import { machineCharts } from '../../src/report/charts.js';
import { startLiveUi } from '../../src/ui/live.js';
import { launchChromium, skipWithoutChromium, watchPage } from '../helpers/browser.js';

const skip = skipWithoutChromium('the live page browser test');

const gate = '[[sim:tool gate {"k":"1"}]]';
const plan = {
  providers: { sim: { type: 'sim', keys: ['sim-live-a', 'sim-live-b'], limits: { rpm: 6000, concurrency: 4 } } },
  models: { fast: { provider: 'sim', model: 'sim-haiku', maxTokens: 64, price: { input: 1, output: 5 } } },
  budget: { usd: 5 },
  tasks: [
    { id: 'a1', model: 'fast', prompt: 'one [[sim:length 12]]' },
    { id: 'a2', model: 'fast', prompt: 'two [[sim:length 12]]' },
    { id: 'a3', model: 'fast', prompt: 'three [[sim:length 12]]' },
    { id: 'held', model: 'fast', tools: ['gate'], prompt: `wait for the gate ${gate}` },
    { id: 'c1', model: 'fast', deps: ['held', 'a1'], prompt: 'after one' },
    { id: 'c2', model: 'fast', deps: ['held'], prompt: 'after two' },
    { id: 'end', model: 'fast', deps: ['c1', 'c2', 'a2', 'a3'], prompt: 'the end' },
  ],
};

describe.skipIf(skip)('the live page in chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('updates while the run goes, draws the DAG and the machines, shows outputs on click, survives a reload, and needs its token', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const swarm = createSwarm({
      tools: [
        {
          name: 'gate',
          description: 'Waits until the test opens it',
          inputSchema: { type: 'object', properties: { k: { type: 'string' } } },
          handler: async () => {
            await released;
            return 'open';
          },
        },
      ],
    });
    const run = swarm.run(plan);
    const events: TimedRunEvent[] = [];
    run.events.on('*', (_t, e) => events.push(e as TimedRunEvent));
    const ui = await startLiveUi({ run, events: [...events] });
    let page: Page | undefined;
    try {
      const origin = new URL(ui.url).origin;
      // Without the token, or with another one: 403, for the page and for the stream.
      for (const path of ['/', '/events', '/?token=nope', `/events?token=${'x'.repeat(24)}`]) {
        expect((await fetch(origin + path)).status, path).toBe(403);
      }
      const head = await fetch(ui.url);
      expect(head.status).toBe(200);
      const csp = head.headers.get('content-security-policy') ?? '';
      expect(csp).toMatch(/default-src 'none'; script-src 'nonce-[^']+'/);
      expect(csp).toContain("connect-src 'self'");
      await head.text();

      page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      const { problems, requests } = watchPage(page);
      await page.goto(ui.url);

      // While `held` waits at its tool: the first tasks done, the agent counted in the tools state.
      const done = page.locator('g.dag-node.s-completed');
      await expect.poll(() => done.count(), { timeout: 60_000 }).toBeGreaterThanOrEqual(3);
      await page.locator('g.ch-state[data-state="agent.active.tools"] text.count').waitFor({ timeout: 60_000 });
      const during = await done.count();
      expect(during).toBeGreaterThanOrEqual(3);
      expect(during).toBeLessThan(plan.tasks.length);
      expect(await page.locator('g.dag-node').count()).toBe(plan.tasks.length);
      // The first view from the stream arrived (the page itself was rendered at load), and the run is not over.
      await page.locator('#live', { hasText: /^live · \d+ events$/ }).waitFor({ timeout: 60_000 });

      // A reload replays the run so far.
      await page.reload();
      await expect.poll(() => done.count(), { timeout: 60_000 }).toBeGreaterThanOrEqual(during);
      expect(await page.locator('g.dag-node').count()).toBe(plan.tasks.length);

      // What the reader changed survives the views rendered again: the zoom, an open task.
      await page.click('#zoom-in');
      await page.locator('details.task', { has: page.locator('code', { hasText: /^a2$/ }) }).locator('summary').click();

      release();
      const result: RunResult = await run.result;
      expect(result.status).toBe('completed');
      await expect.poll(() => done.count(), { timeout: 60_000 }).toBe(plan.tasks.length);
      await page.locator('#live', { hasText: 'finished' }).waitFor({ timeout: 60_000 });
      await page.screenshot({ path: join(tmpdir(), 'swarmstate-live-page.png'), fullPage: true });

      expect(await page.locator('#zoom-level').innerText()).toBe('2x');
      expect(await page.locator('details.task[open] code').allInnerTexts()).toEqual(['a2']);

      // DAG nodes are the tasks, with their edges.
      const nodeIds = await page.locator('g.dag-node').evaluateAll((els) => els.map((e) => e.getAttribute('data-task')));
      expect(nodeIds.sort()).toEqual(plan.tasks.map((t) => t.id).sort());
      expect(await page.locator('path.dag-edge').count()).toBe(plan.tasks.reduce((n, t) => n + (t.deps?.length ?? 0), 0));

      // A click on a task (in the DAG, then in the list) shows its output.
      const a1 = String(result.tasks['a1']!.output);
      expect(a1.length).toBeGreaterThan(0);
      await page.locator('g.dag-node[data-task="a1"]').click();
      const a1Row = page.locator('details.task', { has: page.locator('code', { hasText: /^a1$/ }) });
      await expect.poll(() => a1Row.locator('pre.output').isVisible()).toBe(true);
      expect(await a1Row.locator('pre.output').innerText()).toBe(a1);
      const endRow = page.locator('details.task', { has: page.locator('code', { hasText: /^end$/ }) });
      expect(await endRow.locator('pre.output').isVisible()).toBe(false);
      await endRow.locator('summary').click();
      expect(await endRow.locator('pre.output').innerText()).toBe(String(result.tasks['end']!.output));

      // The budget and the spend against it.
      expect(await page.locator('#cost-over-time .budget').innerText()).toContain('budget $5.00');
      expect(await page.locator('#cost-svg .budget-line').count()).toBe(1);

      // One statechart per machine, with its states' names.
      const charts = machineCharts();
      expect(await page.locator('svg.chart').count()).toBe(charts.length);
      for (const chart of charts) {
        const text = await page.locator(`svg.chart[data-machine="${chart.id}"]`).textContent();
        for (const s of chart.states) expect(text, `${chart.id}: ${s.path}`).toContain(s.path);
      }

      expect(problems).toEqual([]);
      expect(requests.length).toBeGreaterThan(0);
      expect(requests.filter((u) => !u.startsWith(origin + '/'))).toEqual([]);
    } finally {
      release();
      await page?.close();
      await ui.close();
      await run.result.catch(() => undefined);
      await swarm.close();
    }
  }, 120_000);
});
