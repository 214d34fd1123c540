/**
 * The one wait for a stop: the first SIGINT or SIGTERM (or an abort) is taken, once, and every
 * listener it added is gone after it, so a second signal is not caught and ends the process as
 * by default. Signals are delivered with `process.emit`, which calls the listeners as a real
 * signal would, without one reaching this process.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { onFirstStop, untilStopSignal } from '../../src/util/signals.js';

const listening = () => [process.listenerCount('SIGINT'), process.listenerCount('SIGTERM')];
const before = listening();
afterEach(() => expect(listening()).toEqual(before));

describe('onFirstStop', () => {
  it('calls back once, with the first signal, and stops listening to both', () => {
    const seen: (string | undefined)[] = [];
    onFirstStop((signal) => seen.push(signal));
    expect(listening()).toEqual([before[0]! + 1, before[1]! + 1]);
    process.emit('SIGINT', 'SIGINT');
    expect(seen).toEqual(['SIGINT']);
    expect(listening()).toEqual(before);
  });

  it('names SIGTERM when that comes first', () => {
    const seen: (string | undefined)[] = [];
    onFirstStop((signal) => seen.push(signal));
    process.emit('SIGTERM', 'SIGTERM');
    expect(seen).toEqual(['SIGTERM']);
  });

  it('stops listening when told, and calls back no more', () => {
    const seen: (string | undefined)[] = [];
    const stop = onFirstStop((signal) => seen.push(signal));
    stop();
    stop();
    expect(listening()).toEqual(before);
    expect(seen).toEqual([]);
  });

  it('takes an abort as a stop without a signal, even one aborted already', () => {
    const seen: (string | undefined)[] = [];
    const live = new AbortController();
    onFirstStop((signal) => seen.push(signal ?? 'abort'), live.signal);
    live.abort();
    onFirstStop((signal) => seen.push(signal ?? 'aborted before'), AbortSignal.abort());
    expect(seen).toEqual(['abort', 'aborted before']);
  });
});

describe('untilStopSignal', () => {
  it('resolves with the first signal and leaves no listener behind', async () => {
    const stopped = untilStopSignal();
    process.emit('SIGTERM', 'SIGTERM');
    expect(await stopped).toBe('SIGTERM');
  });
});
