/**
 * Opt-in `task:delta` events (`createSwarm({ deltas: true })`): one model call's text as it
 * streams in, for UIs. Never journaled; built only when asked for, so a run without them does no
 * work per piece.
 *
 * What goes out is redacted like every event, and a secret split across two pieces is still
 * caught: the tail that could be the start of a secret waits for the next piece (see
 * `Redactor.settledLength`). A call that fails drops that tail rather than show half a secret.
 */
import type { Redactor } from '../keys.js';

export class DeltaStream {
  /** Text received and not yet sent (it may hold the start of a secret). */
  private held = '';
  /** Everything the stream delivered, as received: what the reply's text is checked against. */
  private streamed = '';

  constructor(
    private readonly redactor: Redactor,
    private readonly emit: (text: string) => void,
  ) {}

  /** A piece of text as the provider streamed it. */
  push(piece: string): void {
    this.streamed += piece;
    this.held += piece;
    const settled = this.redactor.settledLength(this.held);
    if (settled === 0) return;
    this.emit(this.redactor.redact(this.held.slice(0, settled)));
    this.held = this.held.slice(settled);
  }

  /**
   * The call answered with `text` (the reply's text, as received). What the stream did not
   * deliver of it goes out now: all of it for a reply that was not streamed (a scripted provider,
   * a JSON answer, a distributed call), the rest of it when the stream said less (a refusal). So
   * the pieces of a call add up to its reply's text.
   */
  end(text: string): void {
    if (text.startsWith(this.streamed)) this.held += text.slice(this.streamed.length);
    if (this.held !== '') this.emit(this.redactor.redact(this.held));
    this.held = '';
  }
}
