/**
 * `swarmstate ui` as a person runs it (a child process on a real SQLite journal): the list of runs,
 * each run's page rebuilt from the journal, the token and the headers of the live page, odd
 * requests answered, SIGTERM ends it with 0; a missing journal and bad flags are one line, exit 2.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarm } from '../../src/index.js';
import { cli, start, until } from '../helpers/cli.js';
import { rawGet } from './rawHttp.js';

const dir = mkdtempSync(join(tmpdir(), 'swarmstate-ui-command-'));
const db = join(dir, 'runs.db');
const ids: { partial: string; completed: string } = { partial: '', completed: '' };

beforeAll(async () => {
  const swarm = createSwarm({ store: db });
  const models = { m: { provider: 'sim', model: 'sim-small', maxTokens: 64, price: { input: 1, output: 5 } } };
  const providers = { sim: { type: 'sim', keys: ['sim-ui-command'] } };
  const partial = swarm.run({
    providers,
    models,
    tasks: [
      { id: 'intro', model: 'm', prompt: 'hello [[sim:length 6]]' },
      { id: 'broken', model: 'm', prompt: 'no [[sim:error 400]]' },
      { id: 'later', model: 'm', deps: ['broken'], prompt: 'never' },
    ],
  });
  expect((await partial.result).status).toBe('partial');
  const completed = swarm.run({ providers, models, tasks: [{ id: 'only', model: 'm', prompt: 'just one <b>&amp;</b> [[sim:length 4]]' }] });
  expect((await completed.result).status).toBe('completed');
  await swarm.close();
  Object.assign(ids, { partial: partial.id, completed: completed.id });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('swarmstate ui', () => {
  it('serves the list of runs and each run page from the journal, behind the token, until SIGTERM', async () => {
    const ui = start(['ui', '--store', db]);
    try {
      await until(() => /runs page: (\S+)/.test(ui.out.stderr), 'the runs page address');
      const url = new URL(/runs page: (\S+)/.exec(ui.out.stderr)![1]!);
      expect(url.hostname).toBe('127.0.0.1');
      expect(ui.out.stderr).toContain(`serving the runs of ${db} until Ctrl-C`);
      const token = url.searchParams.get('token')!;

      for (const path of ['/', `/run/${ids.partial}`, `/?token=${token.slice(1)}`, `/run/${ids.partial}?token=x${token}`]) {
        const res = await fetch(url.origin + path);
        expect(res.status, path).toBe(403);
        expect(await res.text()).not.toContain(ids.partial);
      }

      const list = await fetch(url);
      expect(list.status).toBe(200);
      expect(list.headers.get('content-security-policy')).toMatch(/^default-src 'none'; script-src 'nonce-[^']+';/);
      expect(list.headers.get('x-content-type-options')).toBe('nosniff');
      expect(list.headers.get('referrer-policy')).toBe('no-referrer');
      const listHtml = await list.text();
      // Newest first: id, status, tasks done, cost, when; each a link to its page.
      const rows = [...listHtml.matchAll(/<tr><td class="id"><a href="([^"]+)"><code>([^<]+)<\/code><\/a><\/td><td><span class="badge [a-z]+">([a-z_]+)<\/span><\/td><td class="n">([^<]+)<\/td><td class="n">([^<]+)<\/td><td>(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)<\/td>/g)];
      expect(rows.map((r) => [r[2], r[3], r[4]])).toEqual([
        [ids.completed, 'completed', '1/1'],
        [ids.partial, 'partial', '1/3'],
      ]);
      expect(rows[0]![1]).toBe(`/run/${ids.completed}?token=${token}`);
      expect(rows.every((r) => r[5]!.startsWith('$'))).toBe(true);

      const page = await fetch(new URL(rows[1]![1]!, url.origin));
      expect(page.status).toBe(200);
      const csp = page.headers.get('content-security-policy')!;
      const nonce = /'nonce-([^']+)'/.exec(csp)![1]!;
      const html = await page.text();
      expect(html).toContain(`<script nonce="${nonce}">`);
      expect(html).toContain(`<code>${ids.partial}</code>`);
      expect(html).toMatch(/class="dag-node s-completed"[^>]* data-task="intro"/);
      expect(html).toMatch(/class="dag-node s-failed"[^>]* data-task="broken"/);
      expect(html).toMatch(/class="dag-node s-skipped"[^>]* data-task="later"/);
      expect(html).toContain(`run ${ids.partial} is partial in the journal`);
      expect(html).toContain(`href="/?token=${token}"`);

      const other = await (await fetch(new URL(rows[0]![1]!, url.origin))).text();
      expect(other).toMatch(/class="dag-node s-completed"[^>]* data-task="only"/);

      expect((await fetch(`${url.origin}/run/nope?token=${token}`)).status).toBe(404);
      expect((await fetch(`${url.origin}/run/a/b?token=${token}`)).status).toBe(404);
      expect((await fetch(`${url.origin}/events?token=${token}`)).status).toBe(404);
      for (const [method, target, status] of [
        ['GET', '//[', 403],
        ['GET', `/run/%zz?token=${token}`, 404],
        ['GET', `//[?token=${token}`, 404],
        ['POST', `/?token=${token}`, 405],
        ['GET', `/${'x'.repeat(100_000)}`, 431],
      ] as const) {
        expect(await rawGet(url.port === '' ? 80 : Number(url.port), target, method), `${method} ${target.slice(0, 40)}`).toBe(status);
      }
      expect((await fetch(url)).status).toBe(200);

      ui.child.kill('SIGTERM');
      expect(await ui.exit).toEqual({ code: 0, signal: null });
      expect(ui.out.stderr).toContain('swarmstate ui: stopped');
      expect(ui.out.stdout).toBe('');
    } finally {
      ui.child.kill('SIGKILL');
    }
  });

  it('says a missing journal in one line, exit 2, and creates nothing', async () => {
    const missing = join(dir, 'nowhere', 'runs.db');
    const r = await cli(['ui', '--store', missing]);
    expect(r).toEqual({ code: 2, stdout: '', stderr: `swarmstate ui: no run journal at ${missing} (check --store or $SWARMSTATE_STORE)\n` });
    expect(existsSync(join(dir, 'nowhere'))).toBe(false);
    const empty = join(dir, 'empty.db');
    writeFileSync(empty, '');
    expect((await cli(['ui', '--store', empty])).stderr).toBe(`swarmstate ui: no run journal at ${empty} (check --store or $SWARMSTATE_STORE)\n`);
  });

  it('refuses bad flags in one line, exit 2', async () => {
    const cases: [string[], string][] = [
      [['ui', '--store', 'memory'], 'swarmstate ui: a journal kept in memory ends with its process: give the journal file with --store (see swarmstate ui --help)\n'],
      [['ui', '--store', db, '--port', 'x'], 'swarmstate ui: --port must be a whole number from 0 to 65535, got "x" (see swarmstate ui --help)\n'],
      [['ui', '--store', db, '--port', '70000'], 'swarmstate ui: --port must be a whole number from 0 to 65535, got "70000" (see swarmstate ui --help)\n'],
      [['ui', '--store', db, '--port'], 'swarmstate ui: --port needs a value (see swarmstate ui --help)\n'],
      [['ui', 'extra'], 'swarmstate ui: unexpected argument "extra" (see swarmstate ui --help)\n'],
      [['ui', '--json'], 'swarmstate ui: unknown option --json (see swarmstate ui --help)\n'],
    ];
    for (const [args, stderr] of cases) expect(await cli(args), args.join(' ')).toEqual({ code: 2, stdout: '', stderr });
    const help = await cli(['ui', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: swarmstate ui \[--store <file>\] \[--port <n>\]/);
  });
});
