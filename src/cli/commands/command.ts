/**
 * What a `swarmstate` command is (its help, its flags, what it does) and how its command line is
 * read: each command parses only its own flags, so a flag that means nothing to it is refused in
 * one line instead of being silently ignored.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { numberFlag, type NumberRule } from '../../util/numberFlag.js';
import { EXIT } from '../exit.js';
import { visible } from '../terminal.js';

/** Where a command writes, and what it knows of the person running it. */
export interface IO {
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
  /**
   * Someone is at the keyboard (stdin is a terminal): `run --ui` then keeps serving the finished
   * run until Ctrl-C. Default false (a script, a pipe, a test).
   */
  interactive?: boolean;
  /** Resolves when that person asks to stop. Default: the first SIGINT or SIGTERM. */
  untilStopped?: () => Promise<void>;
}

export type Options = NonNullable<ParseArgsConfig['options']>;

/** A command line as its command sees it: flags by name, the other words, and the words as read (bare and negative values joined to their flag). */
export interface Args {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  argv: string[];
}

export interface Command {
  name: string;
  /** One line for `swarmstate help`. */
  summary: string;
  /** The whole help of the command: `swarmstate <name> --help` and `swarmstate help <name>`. */
  usage: string;
  /** Its flags (node:util parseArgs); `--help`/`-h` is added for every command. A string flag's value may be a negative number (`--seed -3`). */
  options: Options;
  /** Most words other than flags it takes (a plan file, a run id...); more is a usage error. */
  maxPositionals: number;
  /**
   * String flags that may also be given bare, and then mean this value (`demo --report` is
   * `demo --report swarmstate-report.html`): a bare one followed by another flag is not taken
   * as that flag's value.
   */
  bareDefaults?: Record<string, string>;
  /** Flags of another command that people give this one by mistake, with where they belong. */
  elsewhere?: Record<string, string>;
  /** What the flags alone cannot say is wrong with a command line (a word that is no subcommand, a flag of another subcommand): its usage error, read by `parseCommandLine` as the flags are. */
  check?(args: Args): string | undefined;
  run(args: Args, io: IO): Promise<number>;
}

/**
 * A numeric flag's value by its rule (src/util/numberFlag.ts): undefined when not given, false
 * once the usage error is said.
 */
export function numberOption(command: string, raw: string | boolean | undefined, flag: string, rule: NumberRule, io: IO): number | undefined | false {
  if (raw === undefined) return undefined;
  const read = numberFlag(flag, String(raw), rule);
  if ('value' in read) return read.value;
  usageError(command, read.problem, io);
  return false;
}

/** A command's error line: `swarmstate run: <message> (see swarmstate run --help)`. */
export function usageError(command: string, message: string, io: IO): number {
  io.err.write(`swarmstate ${command}: ${visible(message)} (see swarmstate ${command} --help)\n`);
  return EXIT.invalid;
}

/** A command line read by its command's flags: its Args (and whether it asks for help), or the usage error. */
export type Parsed = { ok: true; args: Args; help: boolean } | { ok: false; message: string };

/**
 * Reads a command line as `runCommand` does, runs nothing: unknown flags, missing values and
 * extra arguments are its usage errors.
 *
 * @example
 * parseCommandLine(run, ['plan.json', '--tasks', 'a']) // { ok: false, message: 'unknown option --tasks' }
 */
export function parseCommandLine(command: Command, argv: string[]): Parsed {
  const options: Options = { ...command.options, help: { type: 'boolean', short: 'h', default: false } };
  const args = normalized(argv, command, options);
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    const text = parseErrorText(error, options);
    const flag = /^unknown option --(.+)$/.exec(text)?.[1];
    const hint = flag !== undefined && command.elsewhere && Object.hasOwn(command.elsewhere, flag) ? `: ${command.elsewhere[flag]}` : '';
    return { ok: false, message: text + hint };
  }
  const values = parsed.values as Args['values'];
  if (!values.help && parsed.positionals.length > command.maxPositionals) {
    return { ok: false, message: `unexpected argument "${parsed.positionals[command.maxPositionals]}"` };
  }
  const read: Args = { values, positionals: parsed.positionals, argv: args };
  const problem = values.help ? undefined : command.check?.(read);
  if (problem !== undefined) return { ok: false, message: problem };
  return { ok: true, args: read, help: values.help === true };
}

/** Parses a command's arguments and runs it; `--help` prints its help. */
export async function runCommand(command: Command, argv: string[], io: IO): Promise<number> {
  const parsed = parseCommandLine(command, argv);
  if (!parsed.ok) return usageError(command.name, parsed.message, io);
  if (parsed.help) {
    io.out.write(`${command.usage}\n`);
    return EXIT.ok;
  }
  return command.run(parsed.args, io);
}

const NEGATIVE = /^-(?:\d|\.\d)/;

/**
 * The words as parseArgs should read them: `--report` bare (last, or before another flag) becomes
 * `--report=<its default>`; a string flag followed by a negative number (`--budget-usd -1`) takes
 * it as its value, which its command then judges (parseArgs would call it a missing value).
 */
function normalized(argv: string[], command: Command, options: Options): string[] {
  const bare = command.bareDefaults ?? {};
  const out: string[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === '--') {
      out.push(...argv.slice(i));
      break;
    }
    const name = arg.startsWith('--') && !arg.includes('=') ? arg.slice(2) : undefined;
    const next = argv[i + 1];
    const stringFlag = name !== undefined && Object.hasOwn(options, name) && options[name]!.type === 'string';
    if (stringFlag && next !== undefined && NEGATIVE.test(next)) {
      out.push(`--${name}=${next}`);
      i += 1;
    } else if (name !== undefined && Object.hasOwn(bare, name) && (next === undefined || (next.startsWith('-') && next !== '-'))) out.push(`--${name}=${bare[name]}`);
    else out.push(arg);
  }
  return out;
}

/**
 * parseArgs' errors in a line a person reads at once. The "ambiguous" one is a string flag whose
 * value was left out before another flag (`--report --quiet`): it is a missing value.
 */
function parseErrorText(error: unknown, options: Options): string {
  const e = error as { code?: string; message?: string };
  const message = String(e.message ?? error);
  const flag = /'(-{1,2}[^' ]+)/.exec(message)?.[1];
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && flag) return `unknown option ${flag}`;
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && flag) {
    const name = flag.replace(/^-+/, '');
    const long = Object.hasOwn(options, name) ? name : Object.entries(options).find(([, o]) => o.short === name)?.[0] ?? name;
    return options[long]?.type === 'string' ? `--${long} needs a value` : `--${long} takes no value`;
  }
  return message;
}
