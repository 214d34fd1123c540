/**
 * The live page's `/events`: Server-Sent Events to a bounded number of clients, each costing the
 * process a bounded number of bytes however it reads.
 *
 * Every message is kept once, as the text that goes on the wire, and each client has a cursor in
 * that list: a new client is sent the replay from the start, a client is written to only while
 * its queue (`writableLength`) is under HIGH_WATER_BYTES, and the rest waits in the list until it
 * drains. So a client holds at most HIGH_WATER_BYTES and one message in this process, however
 * long the replay and however fast the run. The rendered views are not queued: a client gets the
 * latest one when it has caught up, so views it was too slow for are skipped, and a client that
 * skips DROP_AFTER_MISSED_VIEWS of them in a row without draining does not read: it is dropped,
 * and its slot freed.
 * Past MAX_STREAM_CLIENTS at once the next one gets 503.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendText } from './server.js';

/** Event-stream clients at once (tabs of the page); the next one gets 503. */
export const MAX_STREAM_CLIENTS = 32;
/** A client is written to while its queue in this process is under this. */
export const HIGH_WATER_BYTES = 256 * 1024;
/**
 * A client that had no room for this many views in a row (the page renders one at most every
 * 400 ms while the run changes) without draining its queue in between is dropped.
 */
export const DROP_AFTER_MISSED_VIEWS = 3;
/** How long `close` waits at most for clients to take the last messages before it cuts them. */
const CLOSE_GRACE_MS = 5_000;

interface Client {
  res: ServerResponse;
  /** The next message of `messages` it is owed. */
  next: number;
  /** The latest view is not sent to it yet. */
  wantsView: boolean;
  /** Views it had no room for since it last drained. */
  missed: number;
}

export interface StreamStats {
  /** Clients connected now. */
  clients: number;
  /** Bytes queued in this process for all of them. */
  bufferedBytes: number;
  /** Clients turned away with 503 so far. */
  refused: number;
  /** Clients dropped for not reading so far. */
  dropped: number;
}

/** An SSE message: `event: <type>` and the data as one line of JSON. */
export const sseMessage = (type: string, data: unknown): string => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;

export class EventStream {
  private readonly messages: string[] = [];
  private readonly clients = new Set<Client>();
  private view: string | undefined;
  private closing = false;
  private refused = 0;
  private dropped = 0;
  /** Resolves when the last client has gone, once closing. */
  private allGone: (() => void) | undefined;

  /** Appends a message every client gets, in order (the replay included). */
  push(message: string): void {
    this.messages.push(message);
    for (const c of this.clients) if (c.res.writableLength < HIGH_WATER_BYTES) this.pump(c);
  }

  /** The latest view: replaces any not yet sent; each client gets it once caught up. */
  setView(message: string): void {
    this.view = message;
    for (const c of this.clients) {
      c.wantsView = true;
      // Views come from a timer, with turns of the event loop between them (in which a client
      // that reads drains): not a burst of events, which a reader may not keep up with.
      if (c.res.writableLength < HIGH_WATER_BYTES) this.pump(c);
      else if ((c.missed += 1) >= DROP_AFTER_MISSED_VIEWS) this.drop(c);
    }
  }

  /** Takes `/events`: 503 past the cap (or once closing), else the replay, the view, then what comes. */
  attach(req: IncomingMessage, res: ServerResponse): void {
    if (this.closing || this.clients.size >= MAX_STREAM_CLIENTS) {
      this.refused += 1;
      sendText(res, 503, `503: ${MAX_STREAM_CLIENTS} clients follow this run already; close a tab and reload`, { 'Retry-After': '5', Connection: 'close' });
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', Connection: 'keep-alive' });
    const client: Client = { res, next: 0, wantsView: true, missed: 0 };
    this.clients.add(client);
    res.on('drain', () => {
      client.missed = 0;
      this.pump(client);
    });
    // Its connection ended (or the stream did): the response says so, whatever the request did.
    res.on('close', () => this.remove(client));
    this.pump(client);
  }

  stats(): StreamStats {
    let bufferedBytes = 0;
    for (const c of this.clients) bufferedBytes += c.res.writableLength;
    return { clients: this.clients.size, bufferedBytes, refused: this.refused, dropped: this.dropped };
  }

  /**
   * The end: every client is sent what it is owed and the last view (`finalView`, else the
   * latest), then its stream ends. Resolves when all are gone: those that do not take it within
   * CLOSE_GRACE_MS are cut.
   */
  close(finalView?: string): Promise<void> {
    this.closing = true;
    if (finalView !== undefined) {
      this.view = finalView;
      for (const c of this.clients) c.wantsView = true;
    }
    if (this.clients.size === 0) return Promise.resolve();
    const gone = new Promise<void>((resolve) => (this.allGone = resolve));
    for (const c of this.clients) this.pump(c);
    const cut = setTimeout(() => {
      for (const c of this.clients) c.res.destroy();
    }, CLOSE_GRACE_MS);
    return gone.finally(() => clearTimeout(cut));
  }

  /** Writes what `c` is owed while it has room; ends it once it has all, when closing. */
  private pump(c: Client): void {
    const { res } = c;
    if (res.writableEnded || res.destroyed) return;
    while (c.next < this.messages.length && res.writableLength < HIGH_WATER_BYTES) res.write(this.messages[c.next++]!);
    if (c.next < this.messages.length) return;
    if (c.wantsView && this.view !== undefined && res.writableLength < HIGH_WATER_BYTES) {
      c.wantsView = false;
      res.write(this.view);
    }
    if (this.closing && !c.wantsView) res.end();
  }

  private drop(c: Client): void {
    this.dropped += 1;
    this.remove(c);
    c.res.destroy();
  }

  private remove(c: Client): void {
    if (!this.clients.delete(c)) return;
    if (this.closing && this.clients.size === 0) this.allGone?.();
  }
}
