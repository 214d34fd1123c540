/**
 * The report of a real run in a real browser (Debian's chromium through playwright-core): it loads
 * from file:// with no console or page errors, has one bar per model:request in the DOM, shows a
 * tooltip on hover, zooms, and screenshots. Skipped, saying so, when /usr/bin/chromium is missing;
 * `.ci/run` installs it and fails the file if it is missing there (see test/helpers/programs.ts).
 */
import { mkdir, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildReport } from '../../src/report/index.js';
import { launchChromium, skipWithoutChromium, watchPage } from '../helpers/browser.js';
import { recordRun, type RecordedRun } from './fixture.js';

const skip = skipWithoutChromium('the report browser test');

describe.skipIf(skip)('the report in chromium', () => {
  let browser: Browser;
  let run: RecordedRun;
  let dir: string;
  let file: string;
  beforeAll(async () => {
    run = await recordRun();
    // One fixed folder, overwritten by each run: the screenshot is there to look at afterwards.
    dir = join(tmpdir(), 'swarmstate-report-browser');
    await mkdir(dir, { recursive: true });
    file = join(dir, 'report.html');
    await writeFile(file, buildReport({ events: run.events, result: run.result }));
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('loads without errors, has one bar per request, shows a tooltip on hover, zooms and screenshots', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const { problems, requests } = watchPage(page);
    await page.goto(pathToFileURL(file).href);

    const bars = page.locator('[data-call]');
    expect(await bars.count()).toBe(run.events.filter((e) => e.type === 'model:request').length);

    const tip = page.locator('#tip');
    expect(await tip.isHidden()).toBe(true);
    const failed = page.locator('rect.o-other').first(); // the bad request, whose message carries markup
    await failed.hover({ force: true });
    expect(await tip.isVisible()).toBe(true);
    const text = await tip.innerText();
    expect(text).toContain('y.edge');
    expect(text).toContain('bad_request');
    expect(text).toContain('<img src=x onerror=alert(1)>'); // as text: the page made no element of it
    expect(await page.locator('img').count()).toBe(0);

    const ok = page.locator('rect.o-ok').first();
    await ok.hover({ force: true });
    expect(await tip.innerText()).toMatch(/tokens: \d+ in, \d+ out/);

    const width = Number(await page.locator('#tl').getAttribute('width'));
    await page.click('#zoom-in');
    expect(Number(await page.locator('#tl').getAttribute('width'))).toBe(width * 2);
    expect(await page.locator('#tl-axis text').count()).toBeGreaterThan(2);
    await page.click('#zoom-fit');

    const shot = join(dir, 'report.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect((await stat(shot)).size).toBeGreaterThan(10_000);
    expect(problems).toEqual([]);
    expect(requests.every((u) => u.startsWith('file:'))).toBe(true);
    console.info(`report screenshot: ${shot}`);
  });

  it('draws the DAG with every task, opens the output of a task from its node, and draws every machine', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(`page: ${e.message}`));
    await page.goto(pathToFileURL(file).href);
    const ids = await page.locator('g.dag-node').evaluateAll((els) => els.map((e) => e.getAttribute('data-task')));
    expect(ids.sort()).toEqual(Object.keys(run.result.tasks).sort());
    expect(await page.locator('g.dag-node[data-task="y.after"]').getAttribute('class')).toContain('s-skipped');
    await page.locator('g.dag-node[data-task="final"]').click();
    const row = page.locator('details.task[open]');
    expect(await row.count()).toBe(1);
    expect(await row.locator('pre.output').innerText()).toBe(String(run.result.tasks['final']!.output));
    expect(await page.locator('svg.chart').count()).toBe(9); // supervisor, group, agent, pool, key, breaker, toolBus, ledger, task
    expect(problems).toEqual([]);
    await page.close();
  });
});
