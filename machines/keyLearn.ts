/**
 * Learning a key's request rate from its 429s alone, when nothing states it (no plan `rpm`, no
 * rate-limit headers: many OpenAI-compatible gateways, self-hosted servers, AI SDK models).
 *
 * The server is a token bucket (Anthropic's and OpenAI's rate-limit pages; docs/sim.md): it
 * refills at a rate r and holds at most a burst b. A 429 says its bucket was empty then. So:
 *
 * - **Between two 429s** the bucket went from empty to empty: what it admitted of the requests
 *   sent in between is what it refilled, r x the time between them (less what it lost at its cap
 *   where the key sent slower than r: then the count is a floor). That count over that time is
 *   the server's rate, measured (`measured`), and the key paces just under it (`UNDER_MEASURED`).
 *   Windows run from the grant of one refused request to the grant of the next, and a window is
 *   counted once every request sent in it has been answered (keyRelease.ts `closeWindow`): a 429
 *   comes back long before the answers the server admitted ahead of it.
 * - **Before the first 429** the bucket started full: what it admitted then is b + r x that time,
 *   so that rate holds the burst. The first pace is what it admitted over that time plus a second
 *   (about r where the burst is a second of rate, the providers' own figure; above it otherwise),
 *   until the next 429 measures r. Then b = that count less r x that time is the burst the server
 *   allows (`learnedBurst`), and the key's own bucket holds that much.
 * - A window too short to count on (under `MIN_WINDOW_MS`, or fewer than `MIN_WINDOW_ADMITTED`
 *   admitted) measures nothing: it grows to the next 429, and the pace that met this one is cut
 *   by a fifth meanwhile (`CUT_SHORT`).
 * - After a 429 the key's bucket is empty, as the server's is, and its pace spaces the next
 *   request: a backoff on top would only idle it (the server's Retry-After still counts).
 * - **Probing**: with no 429, the rate rises multiplicatively: `PROBE_GAIN_BELOW` a second up to
 *   the measured rate, `PROBE_GAIN_ABOVE` beyond it, so a server that raised its limit is found,
 *   while one that did not answers with one 429 every several seconds.
 *
 * This is the shape of the documented client-side limiters: AWS SDKs' adaptive retry mode (the
 * rate measured over short windows, cut to a share of it on a throttle, then probing upwards,
 * slowly near the rate that met the throttle) and TCP's congestion control it borrows from (RFC
 * 9438). What differs: a token-bucket server tells how much it admitted between two refusals, so
 * the key measures the rate instead of halving towards it. Where the bucket holds one request
 * (60 rpm enforced as one a second) the count between 429s reads the key's own pace more than the
 * server's, and the key settles up to a fifth under the rate (test/machines/keyLearn.test.ts).
 *
 * A stated or learned (headers) rate is not this file's business: there keyRelease.ts cuts to 70%
 * on the second 429 in a row and raises additively.
 */
import { capacityOf, MIN_ADAPTIVE_RPM, MINUTE_MS, type KeyBook, type Learning } from './keyLimits.js';

/** A measured rate paces at this share of it: just under, so the server refuses almost nothing. */
export const UNDER_MEASURED = 0.97;
/** A 429 that ends a window too short to measure cuts the pace to this share of itself. */
export const CUT_SHORT = 0.8;
/** A window measures the rate only if it lasted this long... */
export const MIN_WINDOW_MS = 1_000;
/** ...and the server admitted this many requests in it. */
export const MIN_WINDOW_ADMITTED = 4;
/** Rise a second while under the measured rate (or none is measured): back to it in about a second. */
export const PROBE_GAIN_BELOW = 0.05;
/** Rise a second above the measured rate: a 429 every several seconds against a server that did not move. */
export const PROBE_GAIN_ABOVE = 0.02;
/** The learned burst counts this share of what the first window says (the count is a little high: answers in flight). */
const BURST_SHARE = 0.8;

/**
 * A 429 on a key whose rate nothing states, on a request granted at `sentAt`: measure the window
 * that ended in it, and pace from it. At `book.at` (the 429's answer), once per round (the caller
 * skips 429s on leases granted before the last cut). Windows run from grant to grant (the server
 * saw each request then, give or take the same jitter): the requests counted are those granted in
 * it that the server admitted, whenever their answers came.
 */
export function learnFrom429(book: KeyBook, sentAt: number): KeyBook {
  const learning: Learning = book.learning ?? { mark: { at: sentAt, drained: false }, admitted: 0, retryAfterUntil: -Infinity };
  const { mark, admitted } = learning;
  const span = sentAt - mark.at;
  const here: Learning = { ...learning, mark: { at: sentAt, drained: true }, admitted: 0 };
  if (!mark.drained && learning.measured !== undefined) {
    // The first 429 of a key that started from a peer's rate (adoptPeerRate): no burst to read,
    // and the pace that met it is too high.
    return paced({ ...book, learning: here }, book.adaptive! * CUT_SHORT);
  }
  if (!mark.drained) {
    // The first 429: the window holds the burst, so its rate is a ceiling, not the rate: the pace
    // for one round, if the window says anything.
    const first: Learning = { ...here, firstWindow: { admitted, spanMs: span } };
    if (admitted === 0) return { ...book, learning: first };
    return paced({ ...book, learning: first }, (admitted * MINUTE_MS) / (span + MIN_WINDOW_MS));
  }
  if (span < MIN_WINDOW_MS || admitted < MIN_WINDOW_ADMITTED) {
    // Too short to measure: the window grows to the next 429. A pace that met it is too high,
    // though: a gentle cut meanwhile (an unpaced key waits out its backoff instead).
    return book.adaptive === undefined ? book : paced(book, book.adaptive * CUT_SHORT);
  }
  const measured = (admitted * MINUTE_MS) / span;
  let next: Learning = { ...here, measured };
  const first = learning.firstWindow;
  if (first !== undefined && learning.learnedBurst === undefined) {
    const burst = Math.floor(BURST_SHARE * (first.admitted - (measured * first.spanMs) / MINUTE_MS));
    if (burst > measured / 60) next = { ...next, learnedBurst: burst };
  }
  return paced({ ...book, learning: next }, measured * UNDER_MEASURED);
}

/** Paces at `rpm` from now. The server's bucket is empty (it just refused): the key's is too. */
function paced(book: KeyBook, rpm: number): KeyBook {
  return { ...book, adaptive: Math.max(MIN_ADAPTIVE_RPM, rpm), cutAt: book.at, requests: { ...book.requests, level: Math.min(book.requests.level, 0) } };
}

/**
 * Another key of the same provider measured `rpm` (it passed through the pool): a key with no rate
 * stated, learned or measured of its own starts from it, paced just under it with its bucket as it
 * stands (a fresh key spends one bucket first), until its own 429s measure its own. Keys of one
 * provider usually share a tier; where they do not, the first 429 corrects it.
 */
export function adoptPeerRate(book: KeyBook, rpm: number): KeyBook {
  if (book.learning?.measured !== undefined || book.limits.rpm !== undefined || book.requests.learned !== undefined || !(rpm > 0)) return book;
  const adaptive = Math.max(MIN_ADAPTIVE_RPM, rpm * UNDER_MEASURED);
  const fresh = book.adaptive === undefined;
  const learning: Learning = { ...(book.learning ?? { mark: { at: book.at, drained: false }, admitted: 0, retryAfterUntil: -Infinity }), measured: rpm };
  const next: KeyBook = { ...book, learning, adaptive };
  const capacity = capacityOf(next, 'requests');
  return { ...next, requests: { ...next.requests, level: fresh ? capacity : Math.min(next.requests.level, capacity) } };
}

/**
 * A success on a key paced by what it learned: the rate rises by `gain` of itself a second (each
 * success adds gain x 60 rpm, and successes come rate / 60 a second).
 */
export function probeUp(book: KeyBook): KeyBook {
  if (book.adaptive === undefined) return book;
  const measured = book.learning?.measured;
  const gain = measured !== undefined && book.adaptive >= measured ? PROBE_GAIN_ABOVE : PROBE_GAIN_BELOW;
  return { ...book, adaptive: book.adaptive + gain * 60 };
}
