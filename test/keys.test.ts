/** The redactor (pure): what it replaces, in which forms, and that it copies only what changed. */
import { describe, expect, it } from 'vitest';
import { Keyring, Redactor } from '../src/keys.js';

describe('Redactor', () => {
  it('replaces a secret as is and JSON-escaped, the longest first', () => {
    const r = new Redactor();
    r.add('sk-"quoted"-secret', 'p:1');
    r.add('sk-"quoted"-secret-longer', 'p:2');
    expect(r.redact('a sk-"quoted"-secret b')).toBe('a [redacted p:1] b');
    expect(r.redact(JSON.stringify({ k: 'sk-"quoted"-secret-longer' }))).toBe('{"k":"[redacted p:2]"}');
  });

  it('takes a setting of 8 characters or more, and the credentials of "Scheme <token>" alone', () => {
    const r = new Redactor();
    r.addSetting('1', 'DEBUG');
    r.addSetting('Bearer abcdefgh12', 'AUTH');
    expect(r.redact('1 Bearer abcdefgh12 abcdefgh12')).toBe('1 [redacted AUTH] [redacted AUTH]');
  });

  it('redacts strings deep in plain data, copying only the objects on the way to a change', () => {
    const r = new Redactor();
    r.add('secret-value-1', 'x');
    const untouched = { a: [1, 'fine'] };
    const value = { untouched, list: ['ok', { deep: 'has secret-value-1' }], n: 3, error: new Error('secret-value-1') };
    const out = r.redactDeep(value);
    expect(out).not.toBe(value);
    expect(out.untouched).toBe(untouched);
    expect(out.list[1]).toEqual({ deep: 'has [redacted x]' });
    expect(value.list[1]).toEqual({ deep: 'has secret-value-1' });
    // Not plain data: left alone (its message is redacted where it is turned into text).
    expect(out.error).toBe(value.error);
    expect(r.redactDeep(untouched)).toBe(untouched);
  });

  it('settles streamed text before any secret that may still end in what is to come, or, line by line, at the last line break', () => {
    const r = new Redactor();
    r.add('secret-value-1', 'x');
    const text = 'done\nnow secr';
    // Streamed text: the last 13 characters (a secret's length less one) wait.
    expect(r.settledLength(text)).toBe(text.length - 13);
    // A log: a finished line cannot hold the start of a secret without a line break in it.
    expect(r.settledLength(text, { lines: true })).toBe('done\n'.length);
    expect(r.settledLength('one\ntwo\n', { lines: true })).toBe('one\ntwo\n'.length);
    // A secret with a line break in it (a PEM key) may span lines: then lines settle nothing early.
    r.add('-----BEGIN KEY-----\nabc', 'pem');
    expect(r.settledLength('one\ntwo\n', { lines: true })).toBe(r.settledLength('one\ntwo\n'));
  });

  it('a keyring names its keys by id, whatever their length', () => {
    const keys = new Keyring();
    const [id] = keys.addProvider('p', ['abc'], {});
    expect(keys.redact('key abc')).toBe(`key [redacted ${id}]`);
  });
});
