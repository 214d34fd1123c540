/**
 * Text of outside origin on its way to a terminal: a server's error message, an MCP server's
 * tool names, a plan's strings. A terminal obeys the control characters in what it prints: ESC
 * sequences clear the screen, set the window title, write the clipboard (OSC 52), and a CR lets
 * a line overwrite the one before; bidi overrides reorder what is shown. Every C0 and C1 control
 * (and DEL) and every invisible format character is shown as a visible escape instead, so what is
 * printed is what was sent, and the CLI's own sequences are the only ones the terminal gets. JSON output needs none of this for C0 (JSON escapes it); see `jsonForTerminal`.
 */

/**
 * Invisible format characters (Unicode Cf) and the line and paragraph separators: a right-to-left
 * override (U+202E) shows `exe.txt` as `txt.exe`, isolates and marks reorder what follows, zero
 * widths hide text. The joiners (U+200C, U+200D) are kept: scripts and emoji are drawn with them.
 */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]|(?![\u200c\u200d])[\p{Cf}\u2028\u2029]/gu;
const CONTROL_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]|(?![\u200c\u200d])[\p{Cf}\u2028\u2029]/gu;
const CONTROL_BUT_TAB = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f]|(?![\u200c\u200d])[\p{Cf}\u2028\u2029]/gu;
const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t', '\u001b': '\\e' };

function escapeControl(c: string): string {
  const code = c.codePointAt(0)!;
  if (code <= 0x9f) return NAMED[c] ?? `\\x${code.toString(16).padStart(2, '0')}`;
  return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * One line for a terminal: every control character (line breaks too) as a visible escape.
 *
 * @example
 * visible('bad\x1b]52;c;aGk=\x07 key\r\nok') // 'bad\\e]52;c;aGk=\\x07 key\\r\\nok'
 */
export function visible(text: string): string {
  return text.replace(CONTROL, escapeControl);
}

/** Like `visible`, for text whose line breaks are meant (the CLI's own multi-line messages). */
export function visibleLines(text: string): string {
  return text.replace(CONTROL_BUT_NEWLINE, escapeControl);
}

/** Like `visible`, keeping tabs (a tab cannot move the cursor back over printed text): a model's line of text. */
export function visibleWithTabs(text: string): string {
  return text.replace(CONTROL_BUT_TAB, escapeControl);
}

/**
 * An error for stderr. Errors that list issues (an invalid plan, tools that cannot be set up)
 * keep one issue per line; in anything else a line break came from outside and is shown.
 */
export function errorText(error: unknown): string {
  const e = error as { message?: unknown; issues?: unknown } | null | undefined;
  const message = typeof e?.message === 'string' ? e.message : String(error);
  if (!Array.isArray(e?.issues)) return visible(message);
  const head = message.slice(0, message.indexOf('\n') < 0 ? undefined : message.indexOf('\n'));
  const lines = (e.issues as { path?: unknown; message?: unknown }[]).map((i) => {
    const at = typeof i.path === 'string' && i.path !== '' ? i.path : 'plan';
    return visible(`${at}: ${String(i.message)}`);
  });
  // ToolSetupError indents its issues under the heading; PlanValidationError does not.
  const indent = message.includes('\n  ') ? '  ' : '';
  return [visible(head), ...lines.map((l) => indent + l)].join('\n');
}

/**
 * JSON for a terminal: JSON.stringify escapes C0 controls but leaves DEL, the C1 range
 * (U+0080-U+009F; U+009B is a one-character CSI to some terminals) and the format characters
 * (a bidi override) as they are. Escaped here (each UTF-16 unit), the text parses to the same value.
 */
export function jsonForTerminal(value: unknown): string {
  const units = (c: string) => [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');
  return JSON.stringify(value).replace(/[\u007f-\u009f]|(?![\u200c\u200d])[\p{Cf}\u2028\u2029]/gu, units);
}

/** A run id the journal does not have, as `show`, `resume` and `retry` all say it (exit 2). */
export function noRunLine(command: string, runId: string, file: string): string {
  return `swarmstate ${command}: no run ${visible(runId)} in ${visible(file)} (\`swarmstate runs\` lists its runs)\n`;
}
