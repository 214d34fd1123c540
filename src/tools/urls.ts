/**
 * An MCP server's URL and the credentials it may carry (`https://user:pass@host/mcp?api_key=...`):
 * which parts are secrets, and the URL as a message or the journal may show it. Kept apart from
 * mcp.ts so that the journal (src/durable.ts) can use it without loading the MCP SDK.
 */

/** What `https://host/mcp?api_key=...` is shown as when the URL cannot even be parsed. */
const UNPARSED = 'an invalid URL';

/**
 * The parts of a server's URL that may be credentials: its user name and password (a token is
 * often given as either: `https://<token>@host`), and each query value. Empty ones are left out.
 */
export function urlSecrets(url: string): string[] {
  const parsed = parseUrl(url);
  if (!parsed) return [];
  const found = [...parsed.searchParams.values()];
  // The server may echo them as written (percent-encoded) or decoded: both are looked for.
  for (const part of [parsed.username, parsed.password]) if (part) found.push(decodedOrAsIs(part), part);
  return [...new Set(found.filter((s) => s !== ''))];
}

/** Whether the URL has a part that may be a credential (see urlSecrets). */
export function hasUrlSecrets(url: string): boolean {
  return urlSecrets(url).length > 0;
}

/** A server's URL as a message may show it: no user or password, and the query's values replaced. */
export function shownUrl(url: string): string {
  const parsed = parseUrl(url);
  if (!parsed) return UNPARSED;
  parsed.username = '';
  parsed.password = '';
  for (const name of new Set(parsed.searchParams.keys())) parsed.searchParams.set(name, '...');
  return parsed.toString();
}

/** The URL parsed, or undefined when it cannot be. */
export function parseUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

/** A percent-encoded part decoded, or as written when it does not decode (a stray `%`). */
export function decodedOrAsIs(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}
