/**
 * The stop a person (Ctrl-C), a service manager or `kill` asks for: the first SIGINT or SIGTERM.
 * Only the first is taken: every listener goes with it, so a second signal is not caught and ends
 * the process at once, as by default.
 */

/** A signal that asks a command to stop. */
export type StopSignal = 'SIGINT' | 'SIGTERM';

const STOP_SIGNALS: readonly StopSignal[] = ['SIGINT', 'SIGTERM'];

/**
 * Calls `onStop` once, at the first SIGINT or SIGTERM (with its name) or when `abort` aborts
 * (with undefined; at once when it already has), then stops listening. Returns the function that
 * stops listening earlier (idempotent): call it when the wait is over without a stop.
 *
 * @example
 * const stopListening = onFirstStop((signal) => run.cancel(`interrupted (${signal})`));
 * try { await run.result } finally { stopListening() }
 */
export function onFirstStop(onStop: (signal: StopSignal | undefined) => void, abort?: AbortSignal): () => void {
  let listening = true;
  const stopListening = () => {
    if (!listening) return;
    listening = false;
    for (const name of STOP_SIGNALS) process.off(name, stop);
    abort?.removeEventListener('abort', onAbort);
  };
  function stop(signal: NodeJS.Signals) {
    stopListening();
    onStop(signal as StopSignal);
  }
  function onAbort() {
    stopListening();
    onStop(undefined);
  }
  for (const name of STOP_SIGNALS) process.on(name, stop);
  if (abort?.aborted) onAbort();
  else abort?.addEventListener('abort', onAbort);
  return stopListening;
}

/** Resolves at the first SIGINT or SIGTERM (with its name), or when `abort` aborts (undefined). */
export function untilStopSignal(abort?: AbortSignal): Promise<StopSignal | undefined> {
  return new Promise((resolve) => void onFirstStop(resolve, abort));
}
