/**
 * How a dependency's output reaches a dependent: where the prompt says `{{id}}` the output goes
 * there; outputs the prompt does not place are appended, each in a `<dep id="...">` block, so no
 * finished work is silently dropped.
 */
const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.:/-]+)\s*\}\}/g;

/** Replaces `{{id}}` of the given deps with their outputs; leaves every other `{{...}}` alone. */
export function fillPlaceholders(text: string, deps: readonly string[], outputOf: (id: string) => string): string {
  if (deps.length === 0) return text;
  const depSet = new Set(deps);
  return text.replace(PLACEHOLDER, (whole, id: string) => (depSet.has(id) ? outputOf(id) : whole));
}

export function renderPrompt(prompt: string, deps: readonly string[], outputOf: (id: string) => string): string {
  if (deps.length === 0) return prompt;
  const depSet = new Set(deps);
  const placed = new Set<string>();
  const body = prompt.replace(PLACEHOLDER, (whole, id: string) => {
    if (!depSet.has(id)) return whole;
    placed.add(id);
    return outputOf(id);
  });
  let out = body;
  for (const id of deps) {
    if (placed.has(id)) continue;
    out += `\n\n<dep id="${id}">\n${outputOf(id)}\n</dep>`;
  }
  return out;
}
