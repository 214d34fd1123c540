/**
 * Learning a request rate from 429s alone (machines/keyLearn.ts): the key's pure book driven
 * against a token-bucket server written here (refill r a minute, burst b, a 429 with no
 * Retry-After when empty), every answer at once, time stepped by hand.
 */
import { describe, expect, it } from 'vitest';
import { advance, canGrant, capacityOf, grant, newBook, rateOf, rateSourceOf, type KeyBook } from '../../machines/keyLimits.js';
import { adoptPeerRate, CUT_SHORT, MIN_WINDOW_ADMITTED, MIN_WINDOW_MS, PROBE_GAIN_ABOVE, PROBE_GAIN_BELOW, UNDER_MEASURED } from '../../machines/keyLearn.js';
import { release } from '../../machines/keyRelease.js';
import { request, usage } from '../helpers/keyHarness.js';

/** A server's bucket: `rpm` a minute (or as a function of the time), at most `burst`, full at 0. */
function server(rpm: number | ((now: number) => number), burst: number) {
  let level = burst;
  let at = 0;
  const rate = typeof rpm === 'number' ? () => rpm : rpm;
  return (now: number): boolean => {
    level = Math.min(burst, level + ((now - at) * rate(now)) / 60_000);
    at = now;
    if (level < 1) return false;
    level -= 1;
    return true;
  };
}

/**
 * Sends whenever the key may (it is not backing off and its bucket allows), at most one request
 * each `everyMs` (the client's own pace: concurrency x latency), for `ms`. Each answer comes at once.
 */
function drive(rpm: number, burst: number, ms: number, everyMs = 100) {
  const admits = server(rpm, burst);
  let book: KeyBook = newBook({}, 0);
  const log: { at: number; ok: boolean }[] = [];
  for (let t = 0, n = 0; t <= ms; t += everyMs) {
    book = advance(book, t);
    if (book.backoffUntil > t || !canGrant(book)) continue;
    const id = `r${n++}`;
    book = grant(book, id, request());
    const ok = admits(t);
    book = release(book, id, ok ? { kind: 'ok', usage: usage(1, 1) } : { kind: 'rate_limited' });
    log.push({ at: t, ok });
  }
  return { book, log };
}

describe('a key that learns its rate from 429s alone', () => {
  it.each([
    { rpm: 120, burst: 10 },
    { rpm: 200, burst: 10 },
    { rpm: 300, burst: 5 },
    { rpm: 60, burst: 1 },
  ])('against $rpm rpm with a burst of $burst: measures the rate, learns the burst, then runs just under it with few 429s', ({ rpm, burst }) => {
    const { book, log } = drive(rpm, burst, 120_000, 50);
    expect(rateSourceOf(book)).toBe('adaptive');
    expect(book.learning?.measured! / rpm).toBeGreaterThan(burst === 1 ? 0.8 : 0.95); // a bucket of one: see below
    expect(book.learning?.measured! / rpm).toBeLessThan(1.05);
    if (burst > 2 * Math.max(1, rpm / 60)) {
      expect(book.learning?.learnedBurst).toBeGreaterThan(0.5 * burst);
      expect(book.learning?.learnedBurst).toBeLessThanOrEqual(burst);
      expect(capacityOf(book, 'requests')).toBe(book.learning?.learnedBurst);
    }
    // After the first 20 s: what the server admitted, against what it allows; and the 429s.
    const late = log.filter((l) => l.at >= 20_000);
    const admitted = late.filter((l) => l.ok).length;
    const allowed = (100_000 * rpm) / 60_000;
    // A bucket of one loses refill whenever the key paces under the rate, so the count between
    // two 429s there reads the key's own pace: up to 20% short of the rate (a larger bucket: under 3%).
    expect(admitted / allowed).toBeGreaterThan(burst === 1 ? 0.8 : 0.95);
    expect(late.filter((l) => !l.ok).length / late.length).toBeLessThan(0.08);
  });

  it('the first 429 paces at what the server admitted before it over that time plus a second (its burst included); the next measures between two 429s', () => {
    const admits = server(120, 10);
    let book: KeyBook = newBook({}, 0);
    let n = 0;
    const send = (t: number) => {
      book = grant(advance(book, t), `r${n}`, request());
      const ok = admits(t);
      book = release(book, `r${n++}`, ok ? { kind: 'ok', usage: usage(1, 1) } : { kind: 'rate_limited' });
      return ok;
    };
    // 10 a second: the burst of 10 plus 2 a second lasts until about 1.2 s.
    let t = 0;
    while (send(t)) t += 100;
    expect(t).toBe(1_200);
    expect(book.learning?.firstWindow).toEqual({ admitted: 12, spanMs: 1_200 });
    expect(book.adaptive).toBeCloseTo((12 * 60_000) / (1_200 + MIN_WINDOW_MS)); // 327 rpm: the burst inflates it
    expect(book.backoffUntil).toBeLessThan(1_200); // the pace spaces the next request: no backoff on top
    expect(book.requests.level).toBeLessThanOrEqual(0); // the server's bucket is empty: so is the key's
    // Paced at 327 rpm against 120: the next 429s come soon and cut the pace; the first that ends
    // a window of 1 s and 4 admitted since the first 429 measures the rate.
    let admittedSince = 0;
    for (t = 1_210; book.learning?.measured === undefined && t < 20_000; t += 10) {
      book = advance(book, t);
      if (book.backoffUntil > t || !canGrant(book)) continue;
      if (send(t)) admittedSince++;
    }
    expect(admittedSince).toBeGreaterThanOrEqual(MIN_WINDOW_ADMITTED);
    expect(book.learning?.measured).toBeCloseTo((admittedSince * 60_000) / (t - 10 - 1_200));
    expect(book.learning?.measured! / 120).toBeGreaterThan(0.8);
    expect(book.learning?.measured! / 120).toBeLessThan(1.05);
    expect(rateOf(book, 'requests')).toBeCloseTo(book.learning?.measured! * UNDER_MEASURED);
    // 12 admitted in 1.2 s at the measured rate: the rest was the burst, 80% of it counted.
    expect(book.learning?.learnedBurst).toBe(Math.floor(0.8 * (12 - (book.learning?.measured! * 1_200) / 60_000)));
    expect(capacityOf(book, 'requests')).toBe(book.learning?.learnedBurst);
  });

  it('follows a server that lowers its rate: each window starts at the last 429 that measured, not at the first', () => {
    const admits = server((now) => (now < 30_000 ? 240 : 120), 4);
    let book: KeyBook = newBook({}, 0);
    let n = 0;
    for (let t = 0; t <= 90_000; t += 50) {
      book = advance(book, t);
      if (book.backoffUntil > t || !canGrant(book)) continue;
      book = grant(book, `r${n}`, request());
      book = release(book, `r${n++}`, admits(t) ? { kind: 'ok', usage: usage(1, 1) } : { kind: 'rate_limited' });
    }
    expect(book.learning?.measured! / 120).toBeGreaterThan(0.9);
    expect(book.learning?.measured! / 120).toBeLessThan(1.1);
  });

  it('a 429 too soon after the last (under 1 s, or under 4 admitted) measures nothing: the window grows, and the pace is cut by a fifth', () => {
    let book: KeyBook = newBook({}, 0);
    const at = (t: number, id: string, ok: boolean) => {
      book = grant(advance(book, t), id, request());
      book = release(book, id, ok ? { kind: 'ok', usage: usage(1, 1) } : { kind: 'rate_limited' });
    };
    for (let i = 0; i < 8; i++) at(i * 100, `a${i}`, true);
    at(800, 'x', false); // the first 429: 8 admitted in 0.8 s
    const afterFirst = book.adaptive!;
    expect(afterFirst).toBeCloseTo((8 * 60_000) / 1_800);
    at(2_000, 'b', true);
    at(2_100, 'y', false); // 1.3 s after, but 1 admitted: nothing measured
    expect(book.learning?.measured).toBeUndefined();
    expect(book.adaptive).toBeCloseTo((afterFirst + PROBE_GAIN_BELOW * 60) * CUT_SHORT); // the success probed up; the 429 cut
    expect(book.learning?.mark).toEqual({ at: 800, drained: true }); // the window still runs from the first 429
    for (let i = 0; i < 4; i++) at(3_000 + i * 500, `c${i}`, true);
    at(5_000, 'z', false); // 5 admitted in the 4.2 s since the first 429
    expect(book.learning?.measured).toBeCloseTo((5 * 60_000) / 4_200);
    expect(book.learning?.mark).toEqual({ at: 5_000, drained: true });
  });

  it('closes a window only once the requests sent before its 429 are answered: their admissions count', () => {
    let book: KeyBook = newBook({}, 0);
    book = grant(book, 'first', request());
    book = release(book, 'first', { kind: 'rate_limited' }); // the first 429: nothing admitted, no pace
    expect(book.adaptive).toBeUndefined();
    // From the first 429 (sent at 0) on: three sent at 1,000 and 1,500, answered late; one refused at 2,000, answered at once.
    book = grant(advance(book, 1_000), 'a', request());
    book = grant(advance(book, 1_000), 'b', request());
    book = grant(advance(book, 1_500), 'c', request());
    book = grant(advance(book, 2_000), 'x', request());
    book = release(book, 'x', { kind: 'rate_limited' });
    expect(book.learning?.closing).toEqual({ sentAt: 2_000 });
    expect(book.learning?.measured).toBeUndefined(); // not yet: a, b and c are out
    book = grant(advance(book, 2_100), 'later', request()); // sent after the 429: not in this window
    book = release(advance(book, 2_150), 'later', { kind: 'ok', usage: usage(1, 1) });
    for (const id of ['a', 'b']) book = release(advance(book, 2_200), id, { kind: 'ok', usage: usage(1, 1) });
    expect(book.learning?.measured).toBeUndefined();
    book = release(advance(book, 2_300), 'c', { kind: 'error' }); // the server took it too
    // 3 admitted in 2 s is under 4: still nothing measured, and the window grows from 0.
    expect(book.learning?.closing).toBeUndefined();
    expect(book.learning?.measured).toBeUndefined();
    expect(book.learning?.admitted).toBe(3);
  });

  it('probes up by 5% of the rate a second below the measured rate, and by 2% above it', () => {
    let book: KeyBook = { ...newBook({}, 0), adaptive: 100, learning: { mark: { at: 0, drained: true }, admitted: 0, retryAfterUntil: -Infinity, measured: 120 }, cutAt: -1 };
    book = grant(book, 'a', request());
    book = release(book, 'a', { kind: 'ok', usage: usage(1, 1) });
    expect(book.adaptive).toBeCloseTo(100 + PROBE_GAIN_BELOW * 60);
    book = { ...book, adaptive: 130 };
    book = grant(book, 'b', request());
    book = release(book, 'b', { kind: 'ok', usage: usage(1, 1) });
    expect(book.adaptive).toBeCloseTo(130 + PROBE_GAIN_ABOVE * 60);
  });

  it("starts from a peer's measured rate when it has none of its own, and its first 429 cuts that pace (no burst to read)", () => {
    const fresh = adoptPeerRate(newBook({}, 0), 120);
    expect(fresh.learning?.measured).toBe(120);
    expect(rateOf(fresh, 'requests')).toBeCloseTo(120 * UNDER_MEASURED);
    expect(fresh.requests.level).toBeCloseTo(capacityOf(fresh, 'requests')); // a fresh key spends one bucket first
    expect(adoptPeerRate(newBook({ rpm: 60 }, 0), 120).learning?.measured).toBeUndefined(); // stated: its own
    const measured: KeyBook = { ...newBook({}, 0), learning: { mark: { at: 0, drained: true }, admitted: 0, retryAfterUntil: -Infinity, measured: 90 }, adaptive: 87 };
    expect(adoptPeerRate(measured, 120)).toBe(measured); // measured: its own
    let book = grant(fresh, 'a', request());
    book = release(book, 'a', { kind: 'rate_limited' });
    expect(book.adaptive).toBeCloseTo(120 * UNDER_MEASURED * CUT_SHORT);
    expect(book.learning?.mark).toEqual({ at: 0, drained: true });
  });
});
