/**
 * Secrets never reach the journal: the stored plan has its inline keys and inline MCP env and
 * header values replaced by `[redacted <fingerprint>]`, and an inline server URL with credentials
 * (user, password, query values) by its fingerprint and the URL without them; a resume takes
 * them from the plan file (or the plan passed again) after checking that the fingerprints match.
 * A value or URL given as `{ "env": NAME }` is stored as that, and read again by a resume.
 */
import { fingerprint } from './keys.js';
import { hasUrlSecrets, shownUrl, urlSecrets } from './tools/urls.js';
import { isRecord } from './plan/issues.js';

const REDACTED = /^\[redacted ([0-9a-f]{8})\]$/;
const redacted = (secret: string) => `[redacted ${fingerprint(secret)}]`;
/**
 * A server URL with credentials, as stored: the whole URL's fingerprint, then the URL as a message
 * shows it (`[redacted 1a2b3c4d] https://host/mcp?api_key=...`), so a reader of the journal sees
 * where the server was and a resume can check the URL it is given again is the same.
 */
const REDACTED_URL = /^\[redacted ([0-9a-f]{8})\] /;
const redactedUrl = (url: string) => `${redacted(url)} ${shownUrl(url)}`;

/**
 * The plan as it may be stored: every inline secret replaced by its fingerprint. Only what can
 * hold one is copied (the providers' key lists, the tool servers' env and headers); the rest,
 * the tasks above all, is the caller's own, shared: a 10,000-task plan is not cloned to change
 * a few strings.
 */
export function redactPlan<T>(plan: T): T {
  const copy = copySecretHolders(plan);
  forEachSecret(copy, (holder, key) => {
    const value = holder[key];
    if (typeof value === 'string' && !REDACTED.test(value)) holder[key] = redacted(value);
  });
  forEachUrl(copy, (server) => {
    if (typeof server.url === 'string' && !REDACTED_URL.test(server.url) && hasUrlSecrets(server.url)) server.url = redactedUrl(server.url);
  });
  return copy as T;
}

/** Where a plan holds a value inline that may be a secret (an inline key, an MCP env or header value, a URL with credentials). */
export function inlineSecretPaths(plan: unknown): string[] {
  const paths: string[] = [];
  forEachSecret(plan as Record<string, unknown>, (holder, key, path) => {
    if (typeof holder[key] === 'string') paths.push(path);
  });
  forEachUrl(plan as Record<string, unknown>, (server, path) => {
    if (typeof server.url === 'string' && (REDACTED_URL.test(server.url) || hasUrlSecrets(server.url))) paths.push(path);
  });
  return paths;
}

/** Whether a stored plan had inline secrets (a resume then needs the plan again for them). */
export function hasRedactions(plan: unknown): boolean {
  let found = false;
  forEachSecret(plan as Record<string, unknown>, (holder, key) => {
    if (typeof holder[key] === 'string' && REDACTED.test(holder[key] as string)) found = true;
  });
  forEachUrl(plan as Record<string, unknown>, (server) => {
    if (typeof server.url === 'string' && REDACTED_URL.test(server.url)) found = true;
  });
  return found;
}

/**
 * Puts the secrets of `source` (the plan file, or the plan passed again) back into a stored plan.
 * Each one must have the fingerprint the stored plan names; anything else is an error that says
 * where, never what.
 */
export function unredactPlan<T>(stored: T, source: unknown): T {
  const secrets = new Map<string, string>();
  forEachSecret(source as Record<string, unknown>, (holder, key) => {
    const value = holder[key];
    if (typeof value === 'string' && !REDACTED.test(value)) secrets.set(fingerprint(value), value);
  });
  const urls = new Map<string, string>();
  forEachUrl(source as Record<string, unknown>, (server) => {
    if (typeof server.url === 'string' && !REDACTED_URL.test(server.url)) urls.set(fingerprint(server.url), server.url);
  });
  const copy = structuredClone(stored) as Record<string, unknown>;
  const missing: string[] = [];
  forEachSecret(copy, (holder, key, path) => {
    const match = typeof holder[key] === 'string' ? REDACTED.exec(holder[key] as string) : null;
    if (!match) return;
    const secret = secrets.get(match[1]!);
    if (secret === undefined) missing.push(path);
    else holder[key] = secret;
  });
  forEachUrl(copy, (server, path) => {
    const match = typeof server.url === 'string' ? REDACTED_URL.exec(server.url) : null;
    if (!match) return;
    const url = urls.get(match[1]!);
    if (url === undefined) missing.push(path);
    else server.url = url;
  });
  if (missing.length > 0) {
    throw new Error(`the plan given for the resume lacks the inline secret(s) the run was started with, at: ${missing.join(', ')}`);
  }
  return copy as T;
}

/** A copy of the plan's top level, with every container forEachSecret visits copied too. */
function copySecretHolders(plan: unknown): Record<string, unknown> {
  if (!isRecord(plan)) return structuredClone(plan) as Record<string, unknown>;
  const copy: Record<string, unknown> = { ...plan };
  if (isRecord(plan.providers)) {
    const providers: Record<string, unknown> = { ...plan.providers };
    for (const [name, provider] of Object.entries(providers)) {
      if (isRecord(provider) && Array.isArray(provider.keys)) setOwn(providers, name, { ...provider, keys: structuredClone(provider.keys) });
    }
    copy.providers = providers;
  }
  if (isRecord(plan.tools) && isRecord(plan.tools.servers)) {
    const servers: Record<string, unknown> = { ...plan.tools.servers };
    for (const [name, server] of Object.entries(servers)) {
      if (!isRecord(server)) continue;
      const own: Record<string, unknown> = { ...server };
      for (const field of ['env', 'headers'] as const) if (isRecord(server[field])) own[field] = structuredClone(server[field]);
      setOwn(servers, name, own);
    }
    copy.tools = { ...plan.tools, servers };
  }
  return copy;
}

/** `holder[key] = value`, also for a name such as `__proto__` (plan names are the user's). */
function setOwn(holder: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(holder, key, { value, writable: true, enumerable: true, configurable: true });
}

/** Calls `visit` for every place in a plan that may hold an inline secret. */
function forEachSecret(plan: Record<string, unknown>, visit: (holder: Record<string, unknown>, key: string | number, path: string) => void): void {
  const providers = isRecord(plan.providers) ? plan.providers : {};
  for (const [name, provider] of Object.entries(providers)) {
    if (!isRecord(provider) || !Array.isArray(provider.keys)) continue;
    provider.keys.forEach((_k, i) => visit(provider.keys as unknown as Record<string, unknown>, i, `providers.${name}.keys[${i}]`));
  }
  const servers = isRecord(plan.tools) && isRecord(plan.tools.servers) ? plan.tools.servers : {};
  for (const [name, server] of Object.entries(servers)) {
    if (!isRecord(server)) continue;
    for (const field of ['env', 'headers'] as const) {
      const values = server[field];
      if (!isRecord(values)) continue;
      for (const key of Object.keys(values)) visit(values, key, `tools.servers.${name}.${field}.${key}`);
    }
  }
}

/** Calls `visit` for every tool server that has a `url` (inline, stored or `{ env: NAME }`). */
function forEachUrl(plan: Record<string, unknown>, visit: (server: Record<string, unknown>, path: string) => void): void {
  if (!isRecord(plan)) return;
  const servers = isRecord(plan.tools) && isRecord(plan.tools.servers) ? plan.tools.servers : {};
  for (const [name, server] of Object.entries(servers)) if (isRecord(server) && server.url !== undefined) visit(server, `tools.servers.${name}.url`);
}

/** The values of the plan's tool server settings (`env`, `headers`, `url`; inline or from `env`), with their paths. */
export function settingSecrets(plan: unknown, env: Record<string, string | undefined>): Array<{ path: string; value: string }> {
  const out: Array<{ path: string; value: string }> = [];
  forEachSecret(plan as Record<string, unknown>, (holder, key, path) => {
    if (!path.startsWith('tools.')) return;
    const source = holder[key];
    const value = typeof source === 'string' ? source : isRecord(source) && typeof source.env === 'string' ? env[source.env] : undefined;
    if (value) out.push({ path, value });
  });
  // A URL's credentials (user, password, query values); one from the environment is a secret whole too.
  forEachUrl(plan as Record<string, unknown>, (server, path) => {
    const source = server.url;
    const url = typeof source === 'string' ? source : isRecord(source) && typeof source.env === 'string' ? env[source.env] : undefined;
    if (!url) return;
    for (const value of urlSecrets(url)) out.push({ path, value });
    if (typeof source !== 'string') out.push({ path, value: url });
  });
  return out;
}
