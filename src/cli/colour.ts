/**
 * How the CLI writes to a terminal: whether it redraws a live view, whether it colours, and how
 * wide it is. Decided once per stream from the environment, the conventions people set:
 *
 * - `NO_COLOR` (any non-empty value, https://no-color.org) turns colours off;
 * - `FORCE_COLOR` turns them on even on a pipe (`FORCE_COLOR=0` off), and wins over `NO_COLOR`,
 *   as in Node's own `util.styleText` and most CLIs;
 * - `TERM=dumb` is a terminal that cannot move the cursor or colour: it gets log lines;
 * - a terminal reporting 0 columns (some CI runners and `script` sessions) is taken as 80 wide.
 *
 * Colours are applied to a line after it was escaped and cut to the width, and only around known
 * words, so they never change what a line says or how wide it is.
 */

export interface TerminalMode {
  /** A terminal that can redraw in place: the live view. Otherwise log lines. */
  live: boolean;
  colour: boolean;
  /** Columns, when the stream knows them (never 0). */
  width?: number;
}

type Env = Readonly<Record<string, string | undefined>>;

/** The mode of `stream` under `env`. */
export function terminalMode(stream: { isTTY?: boolean; columns?: number }, env: Env = process.env): TerminalMode {
  const tty = stream.isTTY === true;
  const dumb = env.TERM === 'dumb';
  const force = env.FORCE_COLOR;
  let colour: boolean;
  if (force !== undefined && force !== '') colour = force !== '0' && force.toLowerCase() !== 'false';
  else if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') colour = false;
  else colour = tty && !dumb;
  const columns = stream.columns;
  return { live: tty && !dumb, colour, ...(typeof columns === 'number' && columns > 0 ? { width: columns } : {}) };
}

const SGR = { red: 31, green: 32, yellow: 33, dim: 2, bold: 1 } as const;
type Style = keyof typeof SGR;

function paint(text: string, style: Style): string {
  return `\x1b[${SGR[style]}m${text}\x1b[${style === 'dim' || style === 'bold' ? 22 : 39}m`;
}

/** Words of the live view and the log lines, and how they are coloured. */
const RULES: [RegExp, Style][] = [
  [/\b\d[\d,]* failed\b/g, 'red'],
  [/\b\d[\d,]* rate limited\b/g, 'yellow'],
  [/\b\d[\d,]* completed\b/g, 'green'],
  [/(?<=^key {6}\S+ +)(revoked|backoff|saturated)\b/g, 'yellow'],
  [/(?<=^breaker  \S+ +)(open|halfOpen)\b/g, 'red'],
  [/\[#+/g, 'green'],
  // Log lines: `[12.3s] FAILED   t1 ...`, `[0.2s] retry    t1 ...`.
  [/\b(FAILED|REVOKED|OPEN)\b/g, 'red'],
  [/(?<=^\[[^\]]*\] )(retry|failed\*|budget|denied)(?= )/g, 'yellow'],
];

/** A line of the live view or the log, coloured. The first word (the row's label) is dimmed. */
export function colourLine(line: string): string {
  let out = line;
  for (const [pattern, style] of RULES) out = out.replace(pattern, (m) => (style === 'green' && m.startsWith('[') ? `[${paint(m.slice(1), style)}` : paint(m, style)));
  return out.replace(/^(\S+)( {2,})/, (_m, label: string, gap: string) => `${paint(label, 'dim')}${gap}`);
}
