/**
 * The docs and the commands agree: every flag a command's help names is in docs/cli.md (its
 * synopsis, and a table row), and every `swarmstate ...` command line in README.md and docs/*.md
 * parses: the command exists and its own flag parser accepts the line (nothing is run). The
 * commands are the registry's, as it is at run time: a command added later is covered too.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseCommandLine, type Command } from '../../src/cli/commands/command.js';
import { COMMANDS, commandNamed } from '../../src/cli/commands/index.js';

const DOCS = ['README.md', ...readdirSync('docs').filter((f) => f.endsWith('.md')).map((f) => join('docs', f))];
const CLI_MD = readFileSync('docs/cli.md', 'utf8');
/** What `swarmstate` itself takes before (or instead of) a command. */
const GLOBAL_FLAGS = ['--help', '-h', '--version', '-v'];

/**
 * Every long flag a command has or its help lists (`--help` included): the flags of its
 * options' lines (`  --rpm, --itpm, --otpm <n>`), not the flags of other commands its prose names.
 */
function flagsOf(command: Command): string[] {
  const listed = command.usage
    .split('\n')
    .filter((l) => /^\s{2,}-/.test(l))
    .flatMap((l) => l.trim().split(/\s{2,}/)[0]!.match(/(?<![\w-])--[a-z][a-z0-9-]*/g) ?? []);
  return [...new Set([...Object.keys(command.options).map((f) => `--${f}`), ...listed, '--help'])].sort();
}

const hasToken = (text: string, flag: string) => new RegExp(`(?<![\\w-])${flag}(?![\\w-])`).test(text);

interface Example {
  where: string;
  text: string;
  /** A synopsis (`[--json]`, `<runId>`...): its flags are checked, not parsed as a line. */
  synopsis: boolean;
}

/**
 * The `swarmstate ...` command lines of a markdown text: inline code spans, the lines of `sh`
 * blocks, prompted lines (`$ swarmstate ...`) of other blocks, and blocks made only of
 * `swarmstate` lines (a synopsis, indented lines continuing the one above). Lines that are a
 * command's output (`swarmstate run: --report needs a value`) are left out.
 */
export function examplesOf(file: string, text: string): Example[] {
  const found: Example[] = [];
  const add = (line: number, raw: string) => {
    const command = raw.replace(/^\$ /, '').replace(/^npx /, '').replace(/\s+#.*$/, '').trim();
    const m = /^swarmstate(?:\s+(\S+))?/.exec(command);
    if (!m || m[1]?.endsWith(':')) return;
    found.push({ where: `${file}:${line}`, text: command, synopsis: /[[\]]|\.\.\./.test(command) });
  };
  const lines = text.split('\n');
  /** The text outside fenced blocks, line for line: inline code may run over a line break. */
  const prose = [...lines];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(\s*)```(\w*)/.exec(lines[i]!);
    if (!fence) continue;
    const start = i;
    const block: string[] = [];
    prose[i] = '';
    for (i += 1; i < lines.length && !/^\s*```/.test(lines[i]!); i++) {
      block.push(lines[i]!.slice(fence[1]!.length));
      prose[i] = '';
    }
    prose[i] = '';
    const prompted = block.some((l) => l.startsWith('$ '));
    const onlyCommands = block.every((l) => l.trim() === '' || /^(npx )?swarmstate /.test(l) || /^\s/.test(l));
    block.forEach((line, j) => {
      const n = start + j + 2;
      if (prompted) {
        if (line.startsWith('$ ')) add(n, line);
      } else if (fence[2] === 'sh' || onlyCommands) {
        if (/^\s+\S/.test(line) && found.at(-1)?.where === `${file}:${n - 1}`) {
          // A synopsis continued on the next line.
          const last = found.at(-1)!;
          last.text += ` ${line.trim()}`;
          last.synopsis ||= /[[\]]/.test(line);
          last.where = `${file}:${n}`;
        } else if (/^(npx )?swarmstate /.test(line)) add(n, line);
      }
    });
  }
  const outside = prose.join('\n');
  for (const span of outside.matchAll(/`(swarmstate [^`]*)`/g)) add(outside.slice(0, span.index).split('\n').length, span[1]!.replace(/\s+/g, ' '));
  return found;
}

/** Shell words, quotes removed; up to the first pipe, redirection, `&&` or `;`. */
function wordsOf(line: string): string[] {
  const words: string[] = [];
  for (const m of line.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)) {
    const word = m[3];
    if (word !== undefined && /^(\||\d?>.*|>>?|&&|;|&)$/.test(word)) break;
    words.push(m[1] ?? m[2] ?? word!);
  }
  return words;
}

/** Why an example does not stand, or undefined when it does. */
function problemOf(example: Example): string | undefined {
  const [, name, ...rest] = wordsOf(example.text);
  if (name === undefined) return undefined;
  if (name.startsWith('<')) {
    // `swarmstate <command> --help`: only what every command takes.
    const bad = rest.filter((w) => w.startsWith('-') && !GLOBAL_FLAGS.includes(w));
    return bad.length > 0 ? `not flags of every command: ${bad.join(' ')}` : undefined;
  }
  if (name.startsWith('-')) return GLOBAL_FLAGS.includes(name) ? undefined : `not a flag of swarmstate: ${name}`;
  const command = commandNamed(name);
  if (!command) return `no command "${name}"`;
  if (example.synopsis) {
    const flags = flagsOf(command);
    const unknown = (example.text.match(/(?<![\w-])--[a-z][a-z0-9-]*/g) ?? []).filter((f) => !flags.includes(f) && !GLOBAL_FLAGS.includes(f));
    return unknown.length > 0 ? `not flags of ${name}: ${unknown.join(' ')}` : undefined;
  }
  const parsed = parseCommandLine(command, rest);
  return parsed.ok ? undefined : parsed.message;
}

describe('docs/cli.md names every flag', () => {
  it('every flag of every command is in cli.md, in its synopsis line and in a table row', () => {
    const synopsis = CLI_MD.slice(CLI_MD.indexOf('```') + 3, CLI_MD.indexOf('```', CLI_MD.indexOf('```') + 3));
    // Each command's part of the synopsis: from `swarmstate <name>` to the next `swarmstate `.
    const entries = new Map<string, string>();
    for (const part of synopsis.split(/\n(?=swarmstate )/)) {
      for (const alt of part.split(/\|(?= swarmstate | <command>)/)) {
        const name = /^\s*swarmstate (\S+)/.exec(alt)?.[1];
        if (name) entries.set(name, (entries.get(name) ?? '') + alt);
      }
    }
    const rows = CLI_MD.split('\n').filter((l) => l.startsWith('|'));
    const missing: string[] = [];
    for (const command of COMMANDS) {
      const entry = entries.get(command.name);
      if (entry === undefined) missing.push(`${command.name}: not in the synopsis`);
      for (const flag of flagsOf(command)) {
        if (!hasToken(CLI_MD, flag)) missing.push(`${command.name} ${flag}: not in cli.md`);
        if (flag === '--help') continue;
        if (entry !== undefined && !hasToken(entry, flag)) missing.push(`${command.name} ${flag}: not in its synopsis`);
        if (!rows.some((r) => r.includes(`\`${flag}`) || r.includes(`, \`${flag}`))) missing.push(`${command.name} ${flag}: in no table row`);
      }
    }
    expect(missing).toEqual([]);
  });
});

describe('the command lines in the docs', () => {
  const examples = DOCS.flatMap((file) => examplesOf(file, readFileSync(file, 'utf8')));

  it('are found: synopses, prompted lines, sh blocks and inline code', () => {
    expect(examples.length).toBeGreaterThan(100);
    expect(examples.filter((e) => e.synopsis).length).toBeGreaterThan(15);
    const seen = (where: string) => examples.some((e) => e.where.startsWith(where));
    for (const file of ['README.md', 'docs/cli.md', 'docs/plan-format.md', 'docs/sim.md', 'docs/architecture.md']) expect(seen(file), file).toBe(true);
  });

  it('every one parses with its command\'s own flags', () => {
    const problems = examples.map((e) => ({ e, problem: problemOf(e) })).filter((p) => p.problem !== undefined).map((p) => `${p.e.where}: ${p.e.text} -> ${p.problem}`);
    expect(problems).toEqual([]);
  });

  it('a line that does not parse is caught: an unknown flag, a flag without its value, an extra argument, no such command', () => {
    const bad = ['swarmstate validate plan.json --real', 'swarmstate run plan.json --report', 'swarmstate runs extra', 'swarmstate frobnicate', 'swarmstate retry x [--taks a,b]'];
    expect(bad.map((text) => problemOf({ where: 'x', text, synopsis: /[[\]]/.test(text) }))).toEqual([
      'unknown option --real',
      '--report needs a value',
      'unexpected argument "extra"',
      'no command "frobnicate"',
      'not flags of retry: --taks',
    ]);
  });
});

describe('README.md', () => {
  it('says how many test files need Debian packages: those that skip without a program', () => {
    const files = readdirSync('test', { recursive: true, withFileTypes: true })
      .filter((f) => f.isFile() && f.name.endsWith('.test.ts'))
      .map((f) => join(f.parentPath, f.name))
      // The helper's own test calls it without needing any program.
      .filter((f) => !f.startsWith(join('test', 'helpers')))
      .filter((f) => /\bskipWithout(Chromium)?\(/.test(readFileSync(f, 'utf8')));
    const words = ['No', 'One', 'Two', 'Three', 'Four', 'Five', 'Six', 'Seven', 'Eight', 'Nine', 'Ten', 'Eleven', 'Twelve'];
    const said = /^(\w+) test files? needs? Debian packages/m.exec(readFileSync('README.md', 'utf8'))?.[1];
    expect(said, files.join(', ')).toBe(words[files.length]);
  });
});

describe('docs/cli.md on `swarmstate machines`', () => {
  it('names every machine the command lists, and says how many', async () => {
    const { MACHINES } = await import('../../src/report/charts.js');
    const section = CLI_MD.slice(CLI_MD.indexOf('## `swarmstate machines`'), CLI_MD.indexOf('\n## ', CLI_MD.indexOf('## `swarmstate machines`') + 1));
    // Its first paragraph lists them.
    const listed = section.split('\n\n')[1] ?? '';
    expect(MACHINES.map((m) => m.id).filter((id) => !hasToken(listed, id))).toEqual([]);
    const words = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve'];
    expect(section).toContain(`${words[MACHINES.length]} statecharts`);
  });
});
