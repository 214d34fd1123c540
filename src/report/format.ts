/** Small, deterministic formatters for the report (no locale: the same input gives the same file). */

/** Escapes text for HTML content and attribute values. Every string from a stream goes through it. */
export function esc(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/**
 * JSON that is safe inside `<script type="application/json">`: no `<` (so no `</script>` or
 * `<!--`), and no U+2028/2029.
 */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/** 1234567 -> "1,234,567". */
export function int(n: number): string {
  const s = String(Math.round(n));
  return s.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** Dollars: "—" when unknown, more digits for small amounts. */
export function usd(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—';
  if (n === 0) return '$0';
  if (n >= 100) return `$${n.toFixed(2)}`;
  if (n >= 0.01) return `$${n.toFixed(4)}`;
  return `$${n.toPrecision(2)}`;
}

/** A duration: "850 ms", "12.3 s", "4 min 05 s". */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const min = Math.floor(ms / 60_000);
  const s = Math.round((ms % 60_000) / 1000);
  return s === 60 ? `${min + 1} min 00 s` : `${min} min ${String(s).padStart(2, '0')} s`;
}

/** A time on the run's axis: "12.34 s". */
export function at(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/** A share as a percentage, "—" when the whole is 0. */
export function pct(part: number, whole: number): string {
  if (whole <= 0) return '—';
  const p = (part / whole) * 100;
  return `${p >= 10 || p === 0 ? Math.round(p) : p.toFixed(1)}%`;
}

/** HTML that must not be escaped again: built only by this module's callers from escaped parts. */
export interface Raw {
  readonly html: string;
}
export const raw = (html: string): Raw => ({ html });

export type Cell = string | number | Raw;
export interface Column {
  label: string;
  /** Right-aligned number column. */
  num?: boolean;
  /** Monospace id column. */
  id?: boolean;
  /** Long text (messages). */
  msg?: boolean;
  /** Tooltip of the header. */
  title?: string;
}

/** A table: strings are escaped, numbers printed as they are, Raw cells inserted as they are. */
export function table(columns: Column[], rows: Cell[][], total?: Cell[]): string {
  const cls = (c: Column) => (c.num ? ' class="n"' : c.id ? ' class="id"' : c.msg ? ' class="msg"' : '');
  const cell = (v: Cell) => (typeof v === 'object' ? v.html : typeof v === 'number' ? String(v) : esc(v));
  const head = columns.map((c) => `<th${c.num ? ' class="n"' : ''}${c.title ? ` title="${esc(c.title)}"` : ''}>${esc(c.label)}</th>`).join('');
  const line = (r: Cell[], extra = '') => `<tr${extra}>${r.map((v, i) => `<td${cls(columns[i]!)}>${cell(v)}</td>`).join('')}</tr>`;
  return `<div class="scroll"><table><thead><tr>${head}</tr></thead><tbody>${rows.map((r) => line(r)).join('')}${total ? line(total, ' class="total"') : ''}</tbody></table></div>`;
}
