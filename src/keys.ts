/**
 * API keys and the run's other secrets: resolved from the environment (or inline in a plan),
 * named by a short fingerprint, and kept here only. Machines, events, results and errors carry
 * the id `<provider>:<fp>`; the secret leaves this module only inside a provider request.
 *
 * `Redactor` knows every secret of a run: the provider keys, and the values of its MCP servers'
 * `env` and `headers` (tokens the servers get, which they may print or echo). Whatever leaves the
 * process or is stored (events, the journal, the result, tool results and replies on their way to
 * a model, error messages) goes through it first.
 */
import { createHash } from 'node:crypto';
import type { ProviderKey } from './providers/types.js';

export type KeySource = { env: string } | string;

/** Short, stable, not reversible: 8 hex chars of SHA-256. */
export function fingerprint(secret: string): string {
  return createHash('sha256').update(secret).digest('hex').slice(0, 8);
}

/**
 * A tool server's setting shorter than this is not looked for in text: it is more likely an
 * ordinary value ("1", "true", "debug") than a token, and replacing it everywhere would garble
 * outputs. Provider keys are always looked for, whatever their length.
 */
export const MIN_SECRET_CHARS = 8;

/** Replaces known secrets in text and in plain data (strings inside objects and arrays). */
export class Redactor {
  /** Each form a secret may appear in (as is, JSON-escaped) -> what replaces it. */
  private readonly forms = new Map<string, string>();
  private pattern: RegExp | null = null;
  /** The length of the longest form. */
  private longest = 0;
  /** Whether a form holds a line break (worked out when needed). */
  private multiline: boolean | undefined;

  /** Adds a secret, shown as `[redacted <label>]`. Empty ones are ignored. */
  add(secret: string, label: string): void {
    if (secret === '') return;
    const shown = `[redacted ${label}]`;
    this.forms.set(secret, shown);
    // Inside JSON text (an error body, a tool's JSON result) quotes and backslashes are escaped.
    const escaped = JSON.stringify(secret).slice(1, -1);
    if (escaped !== secret) this.forms.set(escaped, shown);
    this.longest = Math.max(this.longest, secret.length, escaped.length);
    this.pattern = null;
    this.multiline = undefined;
  }

  /**
   * A tool server's `env` or `headers` value (see MIN_SECRET_CHARS). A header's credentials
   * ("Bearer <token>") are also looked for alone: servers echo the token, not the scheme.
   */
  addSetting(value: string, label: string): void {
    if (value.length >= MIN_SECRET_CHARS) this.add(value, label);
    const token = value.trim().split(/\s+/).pop() ?? '';
    if (token !== value && token.length >= MIN_SECRET_CHARS) this.add(token, label);
  }

  get size(): number {
    return this.forms.size;
  }

  redact(text: string): string {
    if (this.forms.size === 0 || text === '') return text;
    const pattern = this.patternOf();
    pattern.lastIndex = 0;
    if (!pattern.test(text)) return text;
    return text.replace(pattern, (secret) => this.forms.get(secret)!);
  }

  private patternOf(): RegExp {
    // Longest first: a secret that contains another is replaced whole.
    this.pattern ??= new RegExp(
      [...this.forms.keys()]
        .sort((a, b) => b.length - a.length)
        .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('|'),
      'g',
    );
    return this.pattern;
  }

  /**
   * How much of `text` (streamed text, more of it still to come) may be shown now: no secret
   * runs past that point, and none can start before it and end in what is still to come (the
   * last `longest - 1` characters wait). `text.length` when there is no secret.
   */
  settledLength(text: string, { lines = false }: { lines?: boolean } = {}): number {
    if (this.forms.size === 0) return text.length;
    let cut = Math.max(0, text.length - (this.longest - 1));
    // Line by line (a log): no secret without a line break in it can run past the last one, so
    // a finished line is shown at once instead of waiting for more text.
    if (lines) {
      this.multiline ??= [...this.forms.keys()].some((form) => form.includes('\n'));
      if (!this.multiline) cut = Math.max(cut, text.lastIndexOf('\n') + 1);
    }
    // A whole secret across the cut moves it back to where that secret starts.
    const pattern = this.patternOf();
    pattern.lastIndex = 0;
    for (let m = pattern.exec(text); m !== null && m.index < cut; m = pattern.exec(text)) {
      if (m.index + m[0].length > cut) return m.index;
    }
    return cut;
  }

  /** `value` with every string in it redacted; objects and arrays are copied only where something changed. */
  redactDeep<T>(value: T): T {
    if (this.forms.size === 0) return value;
    return this.walk(value, 0) as T;
  }

  private walk(value: unknown, depth: number): unknown {
    if (typeof value === 'string') return this.redact(value);
    // Deeper than any event or result: left as it is rather than risk a cycle.
    if (value === null || typeof value !== 'object' || depth > 64) return value;
    if (Array.isArray(value)) {
      let copy: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const next = this.walk(value[i], depth + 1);
        if (next !== value[i]) (copy ??= value.slice())[i] = next;
      }
      return copy ?? value;
    }
    // Only plain data: an Error or a class instance keeps its own shape (and is not ours to copy).
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) return value;
    let copy: Record<string, unknown> | undefined;
    for (const key of Object.keys(value)) {
      const before = (value as Record<string, unknown>)[key];
      const next = this.walk(before, depth + 1);
      if (next !== before) {
        copy ??= Object.assign(Object.create(proto) as object, value) as Record<string, unknown>;
        copy[key] = next;
      }
    }
    return copy ?? value;
  }
}

export class Keyring {
  private readonly byId = new Map<string, ProviderKey>();
  /** Every secret of the run: these keys, and what `redactor.addSetting` was given. */
  readonly redactor = new Redactor();

  /**
   * Adds a provider's keys; returns their ids in order, without duplicates (the same secret
   * twice is one key). Env names must be set (the plan validator checks this first).
   */
  addProvider(provider: string, sources: readonly KeySource[], env: Record<string, string | undefined>): string[] {
    const ids: string[] = [];
    for (const source of sources) {
      const secret = typeof source === 'string' ? source : env[source.env];
      if (secret === undefined || secret === '') throw new Error(`providers.${provider}: a key's environment variable is not set`);
      const id = `${provider}:${fingerprint(secret)}`;
      if (!this.byId.has(id)) {
        this.byId.set(id, { id, secret });
        this.redactor.add(secret, id);
        ids.push(id);
      }
    }
    return ids;
  }

  /** A key with no secret (simulated providers that ask for none). */
  addAnonymous(provider: string): string {
    const id = `${provider}:anonymous`;
    if (!this.byId.has(id)) this.byId.set(id, { id, secret: '' });
    return id;
  }

  get(id: string): ProviderKey {
    const key = this.byId.get(id);
    if (!key) throw new Error(`unknown key id ${id}`);
    return key;
  }

  /** Replaces every known secret in `text` with `[redacted <keyId>]` (or the setting's path). */
  redact(text: string): string {
    return this.redactor.redact(text);
  }
}
