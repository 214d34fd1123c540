/**
 * How a dependency's output reaches a dependent: where the prompt says `{{id}}` the output goes
 * there, and `{{id.field.sub}}` places one field of a structured output; outputs the prompt does
 * not place are appended, each in a `<dep id="...">` block, so no finished work is silently
 * dropped.
 */
const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.:/-]+)\s*\}\}/g;

/**
 * What a caller fills itself in the same pass as the deps (a map's item, a reduce's inputs): the
 * text for `{{name}}`, or undefined to leave it to the deps. One pass: nothing placed is read again,
 * so a dep's answer that says `{{item.name}}` stays as it is.
 */
export type OwnPlaceholders = (name: string) => string | undefined;

/** Replaces `{{id}}` of the given deps with their outputs; leaves every other `{{...}}` alone. */
export function fillPlaceholders(text: string, deps: readonly string[], outputOf: (id: string) => string, own?: OwnPlaceholders): string {
  if (deps.length === 0 && !own) return text;
  const depSet = new Set(deps);
  return text.replace(PLACEHOLDER, (whole, name: string) => {
    const mine = own?.(name);
    if (mine !== undefined) return mine;
    const ref = refOf(name, depSet);
    return ref ? placed(ref, outputOf) : whole;
  });
}

/**
 * What `{{name}}` reads: a dep's whole output, or one field of its structured output
 * (`{{extract.title}}`). Task ids may contain dots, so the longest prefix that is a dep wins.
 */
function refOf(name: string, deps: ReadonlySet<string>): { id: string; path: string[] } | undefined {
  if (deps.has(name)) return { id: name, path: [] };
  if (!name.includes('.')) return undefined;
  const parts = name.split('.');
  for (let k = parts.length - 1; k >= 1; k--) {
    const id = parts.slice(0, k).join('.');
    if (deps.has(id)) return { id, path: parts.slice(k) };
  }
  return undefined;
}

function placed(ref: { id: string; path: string[] }, outputOf: (id: string) => string): string {
  const output = outputOf(ref.id);
  return ref.path.length === 0 ? output : fieldText(output, ref.path);
}

/** One field of a structured output (`a.b.0`) as text: a string as it is, anything else as JSON; '' when absent. */
export function fieldText(output: string, path: readonly string[]): string {
  let value: unknown;
  try {
    value = JSON.parse(output);
  } catch {
    return '';
  }
  for (const key of path) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, key)) return '';
    value = (value as Record<string, unknown>)[key];
  }
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
}

/**
 * The prompt with its deps placed (`own` filled in the same pass), and the deps it does not place
 * appended. `absent`: a join's deps that did not complete: `outputOf` gives '' for them, and they
 * are not appended (an empty block would say they answered nothing).
 */
export function renderPrompt(prompt: string, deps: readonly string[], outputOf: (id: string) => string, own?: OwnPlaceholders, absent?: ReadonlySet<string>): string {
  if (deps.length === 0 && !own) return prompt;
  const depSet = new Set(deps);
  const done = new Set<string>();
  const body = prompt.replace(PLACEHOLDER, (whole, name: string) => {
    const mine = own?.(name);
    if (mine !== undefined) return mine;
    const ref = refOf(name, depSet);
    if (!ref) return whole;
    // A dep read field by field counts as placed: the prompt chose what it needs of it.
    done.add(ref.id);
    return placed(ref, outputOf);
  });
  let out = body;
  for (const id of deps) {
    if (done.has(id) || absent?.has(id)) continue;
    out += `\n\n<dep id="${id}">\n${outputOf(id)}\n</dep>`;
  }
  return out;
}
