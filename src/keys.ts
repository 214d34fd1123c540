/**
 * API keys: resolved from the environment (or inline in a plan), named by a short fingerprint,
 * and kept here only. Machines, events, results and errors carry the id `<provider>:<fp>`; the
 * secret leaves this module only inside a provider request. Every message that might echo a key
 * (a server error body, say) goes through `redact` first.
 */
import { createHash } from 'node:crypto';
import type { ProviderKey } from './providers/types.js';

export type KeySource = { env: string } | string;

/** Short, stable, not reversible: 8 hex chars of SHA-256. */
export function fingerprint(secret: string): string {
  return createHash('sha256').update(secret).digest('hex').slice(0, 8);
}

export class Keyring {
  private readonly byId = new Map<string, ProviderKey>();
  private readonly secrets = new Map<string, string>();
  private pattern: RegExp | null = null;

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
        this.secrets.set(secret, id);
        this.pattern = null;
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

  /** Replaces every known secret in `text` with `[redacted <keyId>]`. */
  redact(text: string): string {
    if (this.secrets.size === 0) return text;
    if (!this.pattern) {
      const escaped = [...this.secrets.keys()]
        .filter((s) => s.length > 0)
        .sort((a, b) => b.length - a.length)
        .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
      if (escaped.length === 0) return text;
      this.pattern = new RegExp(escaped.join('|'), 'g');
    }
    return text.replace(this.pattern, (secret) => `[redacted ${this.secrets.get(secret)}]`);
  }
}
