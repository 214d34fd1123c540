/**
 * `swarmstate init [dir]`: a starter plan that runs as it is (on the embedded simulator) and a
 * README that explains each part. Plans are strict JSON (an unknown field such as `$comment` is an
 * error, to catch typos), so the explanations live in the README, not in the plan.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { lstatSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { EXIT } from '../exit.js';
import { visible } from '../terminal.js';
import type { Command } from './command.js';

export const STARTER_PLAN = {
  providers: {
    sim: { type: 'sim', limits: { rpm: 600, concurrency: 4 } },
  },
  models: {
    fast: { provider: 'sim', model: 'sim-fast', maxTokens: 256, price: { input: 1, output: 5 } },
    strong: { provider: 'sim', model: 'sim-strong', maxTokens: 512, price: { input: 3, output: 15 } },
  },
  budget: { usd: 0.5 },
  tasks: [
    { id: 'brief', model: 'fast', prompt: 'Write one line of tone guidance for short product notes.' },
    {
      id: 'notes',
      kind: 'map',
      items: { values: [{ name: 'desk lamp' }, { name: 'office chair' }, { name: 'standing desk' }, { name: 'monitor arm' }] },
      deps: ['brief'],
      model: 'fast',
      prompt: '{{brief}}\nWrite a two-sentence note about the {{item.name}}.',
    },
    {
      id: 'summary',
      kind: 'reduce',
      over: 'notes',
      fanIn: 2,
      model: 'strong',
      prompt: 'Merge these product notes into one short overview:\n{{inputs}}',
    },
  ],
};

export const STARTER_README = `# A swarmstate plan

\`plan.json\` runs as it is, on the simulated provider built into swarmstate (no key, no network):

    swarmstate validate plan.json
    swarmstate run plan.json
    swarmstate show <runId>          # the run id is printed first; each task's output

What each part of \`plan.json\` does (all fields: docs/plan-format.md):

- \`providers\`: where calls go. \`sim\` is the embedded simulator; \`limits\` are per key (requests
  per minute, calls at once). For real calls use \`{"type": "anthropic", "keys": [{"env":
  "ANTHROPIC_API_KEY"}]}\` (or \`"openai"\` with \`OPENAI_API_KEY\`): keys come from the
  environment. \`swarmstate run plan.json --real\` does that switch for you.
- \`models\`: the names tasks use. \`fast\` and \`strong\` are two models of the \`sim\` provider;
  \`price\` (USD per million input/output tokens) lets the budget count what calls cost.
- \`budget\`: the run stops sending calls before it spends more than \`usd\` dollars.
- \`tasks\`: what to do. \`brief\` is one model call. \`notes\` is a map: one sub-task per item of
  \`items\` (here inline \`values\`; \`{"file": "items.jsonl"}\` reads a file), each with
  \`{{item.name}}\` filled in and \`{{brief}}\` replaced by the brief's output. \`summary\` is a
  reduce: it merges the notes' outputs (\`{{inputs}}\`) in calls of at most \`fanIn\` inputs each,
  then merges those, up to one answer.

Dependencies run first (\`deps\`, and a reduce's \`over\`); everything else runs in parallel within
the providers' limits.
`;

export const init: Command = {
  name: 'init',
  summary: 'Write a starter plan (plan.json) and a README explaining it.',
  usage: `Usage: swarmstate init [dir]

Writes plan.json (a simulated provider, two models, a budget, a map and a reduce) and README.md
(what each part does) into <dir> (default: the working directory, made if missing). Refuses to
overwrite either file. Then: cd <dir> && swarmstate run plan.json

Options:
  -h, --help         This help.`,
  options: {},
  maxPositionals: 1,
  async run(args, io) {
    const dir = resolve(args.positionals[0] ?? '.');
    const files = [
      { path: join(dir, 'plan.json'), text: JSON.stringify(STARTER_PLAN, null, 2) + '\n' },
      { path: join(dir, 'README.md'), text: STARTER_README },
    ];
    // lstat, not exists: a dangling link is there too, and writing through it would fail midway.
    const present = files.filter((f) => lstatSync(f.path, { throwIfNoEntry: false }) !== undefined).map((f) => visible(f.path));
    if (present.length > 0) {
      io.err.write(`swarmstate init: ${present.join(' and ')} already exist${present.length === 1 ? 's' : ''}: nothing written (choose another folder, or move ${present.length === 1 ? 'it' : 'them'} away)\n`);
      return EXIT.invalid;
    }
    // What this call made, undone if a later step fails: no half-made folder is left behind.
    let madeDir: string | undefined;
    const written: string[] = [];
    try {
      madeDir = await mkdir(dir, { recursive: true });
      // `wx`: a file that appeared since the check above is still not overwritten.
      for (const f of files) {
        await writeFile(f.path, f.text, { flag: 'wx' });
        written.push(f.path);
      }
    } catch (error) {
      for (const path of written) await rm(path, { force: true });
      if (madeDir !== undefined) await rm(madeDir, { recursive: true, force: true });
      const e = error as NodeJS.ErrnoException;
      io.err.write(`swarmstate init: cannot write in ${visible(dir)}: ${visible(String(e.code ?? e.message))}\n`);
      return EXIT.invalid;
    }
    for (const f of files) io.err.write(`wrote ${visible(f.path)}\n`);
    const cd = args.positionals[0] !== undefined ? `cd ${visible(args.positionals[0])} && ` : '';
    io.err.write(`next: ${cd}swarmstate run plan.json\n`);
    return EXIT.ok;
  },
};
