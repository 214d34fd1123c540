/**
 * Hashes the simulator decides by: everything it "chooses" is a function of the request content
 * and the seed, so replies and faults do not depend on arrival order.
 */
import { createHash } from 'node:crypto';
import { fingerprint as keyFingerprint } from '../keys.js';

/** sha256 of `text`, base64url (43 chars). */
export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('base64url');
}

/**
 * How a key appears anywhere the simulator reports it: the runtime's own key fingerprint, so a
 * key id `<provider>:<fp>` and the simulator's stats name the same key the same way.
 */
export function fingerprint(secret: string | undefined): string {
  if (!secret) return 'none';
  let fp = fingerprints.get(secret);
  if (fp === undefined) {
    fp = keyFingerprint(secret);
    // Bounded: a client may send any number of different (wrong) keys.
    if (fingerprints.size >= 1_024) fingerprints.clear();
    fingerprints.set(secret, fp);
  }
  return fp;
}

/** Every request names its key: the hash of a key seen before is not made again. */
const fingerprints = new Map<string, string>();

/** A number in [0, 1) from the parts, stable across runs and platforms. */
export function unitFloat(...parts: (string | number)[]): number {
  const digest = createHash('sha256').update(parts.join('\u0000')).digest();
  return digest.readUIntBE(0, 6) / 2 ** 48;
}

/** The next link of a hash chain: the identity of a prefix that ends with `text`. */
export function chain(previous: string, text: string): string {
  return createHash('sha256').update(previous).update(`\u0000${text.length}\u0000`).update(text).digest('base64url').slice(0, 24);
}

/** An id like `toolu_01…` of `length` base62 characters derived from the parts. */
export function derivedId(prefix: string, length: number, ...parts: (string | number)[]): string {
  const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  const digest = createHash('sha256').update(parts.join('\u0000')).digest();
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[digest[i % digest.length]! % 62];
  return prefix + out;
}
