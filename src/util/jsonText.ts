/**
 * A JSON file's text parsed, with a syntax error placed where an editor shows it: line and
 * column, not V8's character offset (`at position 128`), which some of its messages do not even
 * give (`Unexpected token 'x', "..." is not valid JSON`), and which Node versions word differently.
 */

/** A file that is not JSON: where the parser stopped (1-based line and column) and why. */
export class JsonTextError extends Error {
  readonly code = 'JSON_SYNTAX';
  constructor(
    readonly source: string,
    readonly line: number,
    readonly column: number,
    readonly reason: string,
  ) {
    super(`${source} is not valid JSON: line ${line}, column ${column}: ${reason}`);
    this.name = 'JsonTextError';
  }
}

/**
 * `text` (the content of `source`) as JSON. A UTF-8 byte order mark, which editors on Windows
 * save and JSON.parse refuses at a character nobody can see, is dropped first.
 *
 * @throws JsonTextError naming `source`, the line and the column.
 * @example
 * parseJsonText('{\n  "a": 1,\n}', 'plan.json')
 * // JsonTextError: plan.json is not valid JSON: line 3, column 1: Expected double-quoted property name
 */
export function parseJsonText(text: string, source: string): unknown {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  try {
    return JSON.parse(body) as unknown;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const offset = syntaxErrorAt(body);
    const before = body.slice(0, offset);
    const line = before.split('\n').length;
    const column = offset - (before.lastIndexOf('\n') + 1) + 1;
    const reason = message
      .replace(/ (?:in JSON )?at position \d+/, '')
      .replace(/ \(line \d+ column \d+\)/, '')
      .replace(/, ".*" is not valid JSON$/s, '');
    throw new JsonTextError(source, line, column, reason);
  }
}

const SCALAR = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y;
const ESCAPES = '"\\/bfnrt';
const HEX4 = /[0-9a-fA-F]{4}/y;

/**
 * The offset of the first character at which `s` stops being JSON (its length when it ends too
 * soon). A loop with its own stack of open brackets: a file nested deeper than the call stack is
 * placed too.
 */
export function syntaxErrorAt(s: string): number {
  let i = 0;
  const open: string[] = [];
  const skip = () => {
    while (i < s.length && (s[i] === ' ' || s[i] === '\t' || s[i] === '\n' || s[i] === '\r')) i++;
  };
  /** At a `"`: past the string, or false with `i` on the character that breaks it. */
  const string = (): boolean => {
    i++;
    while (i < s.length) {
      const c = s.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return true;
      }
      if (c < 0x20) return false;
      if (c === 0x5c) {
        const e = s[i + 1];
        HEX4.lastIndex = i + 2;
        if (e === 'u' ? !HEX4.test(s) : e === undefined || !ESCAPES.includes(e)) {
          i++;
          return false;
        }
        i += e === 'u' ? 6 : 2;
        continue;
      }
      i++;
    }
    return false;
  };
  /** A member's `"name":`, or false with `i` where it breaks. */
  const key = (): boolean => {
    skip();
    if (s[i] !== '"' || !string()) return false;
    skip();
    if (s[i] !== ':') return false;
    i++;
    return true;
  };
  let wantValue = true;
  for (;;) {
    skip();
    if (wantValue) {
      const c = s[i];
      if (c === '{' || c === '[') {
        open.push(c);
        i++;
        skip();
        if (s[i] === (c === '{' ? '}' : ']')) {
          open.pop();
          i++;
          wantValue = false;
        } else if (c === '{' && !key()) return i;
        continue;
      }
      if (c === '"') {
        if (!string()) return i;
      } else {
        SCALAR.lastIndex = i;
        const m = SCALAR.exec(s);
        if (!m) return i;
        i += m[0].length;
      }
      wantValue = false;
      continue;
    }
    const top = open.at(-1);
    if (top === undefined) return i;
    const c = s[i];
    if (c === ',') {
      i++;
      if (top === '{' && !key()) return i;
      wantValue = true;
    } else if (c === (top === '{' ? '}' : ']')) {
      open.pop();
      i++;
    } else return i;
  }
}
