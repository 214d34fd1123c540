/**
 * A Server-Sent Events parser (the WHATWG `text/event-stream` rules), incremental: feed it bytes
 * as they arrive, however the network splits them, and it yields whole events.
 *
 * Lines end in CRLF, LF or CR (a CR at the end of one chunk and an LF at the start of the next
 * are one line ending); lines starting with `:` are comments; `data` lines join with `\n`; one
 * space after the colon is dropped; a blank line dispatches the event; an event with no data is
 * not dispatched; whatever is pending when the stream ends is discarded, as the spec says.
 */

/** One dispatched event. `event` defaults to "message". */
export interface SseEvent {
  event: string;
  data: string;
  id?: string;
  /** The server's reconnection time in ms, when it sent one. */
  retry?: number;
}

/**
 * The incremental parser.
 *
 * @example
 * const parser = new SseParser();
 * parser.push('event: ping\ndata: {}\n\n'); // [{ event: 'ping', data: '{}' }]
 */
export class SseParser {
  private readonly decoder = new TextDecoder('utf-8');
  private buffer = '';
  /** The previous chunk ended in CR: an LF at the start of the next one belongs to it. */
  private pendingCR = false;
  private sawFirstChunk = false;
  private eventType = '';
  private data: string[] = [];
  private lastId: string | undefined;
  private retry: number | undefined;

  /** Feeds a chunk (bytes or text); returns the events it completed, in order. */
  push(chunk: Uint8Array | string): SseEvent[] {
    let text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    if (!this.sawFirstChunk && text.length > 0) {
      this.sawFirstChunk = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (this.pendingCR && text.startsWith('\n')) text = text.slice(1);
    this.pendingCR = false;
    this.buffer += text;

    const events: SseEvent[] = [];
    let start = 0;
    for (let i = 0; i < this.buffer.length; i++) {
      const c = this.buffer.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const line = this.buffer.slice(start, i);
      if (c === 13) {
        if (i + 1 < this.buffer.length) {
          if (this.buffer.charCodeAt(i + 1) === 10) i++;
        } else {
          this.pendingCR = true;
        }
      }
      start = i + 1;
      const event = this.line(line);
      if (event) events.push(event);
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  /** Ends the stream: flushes the decoder; an event without its blank line is dropped. */
  end(): SseEvent[] {
    const rest = this.decoder.decode();
    const events = rest ? this.push(rest) : [];
    this.buffer = '';
    this.data = [];
    this.eventType = '';
    return events;
  }

  private line(line: string): SseEvent | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.eventType = value;
        break;
      case 'data':
        this.data.push(value);
        break;
      case 'id':
        if (!value.includes('\u0000')) this.lastId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
      default:
        // Unknown fields are ignored.
        break;
    }
    return undefined;
  }

  private dispatch(): SseEvent | undefined {
    const hasData = this.data.length > 0;
    const event: SseEvent = { event: this.eventType || 'message', data: this.data.join('\n') };
    this.eventType = '';
    this.data = [];
    if (!hasData) return undefined;
    if (this.lastId !== undefined) event.id = this.lastId;
    if (this.retry !== undefined) event.retry = this.retry;
    return event;
  }
}

/**
 * The events of a byte stream, as they complete.
 *
 * @example
 * for await (const event of readSse(response.body)) console.log(event.event, event.data);
 */
export async function* readSse(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<SseEvent> {
  const parser = new SseParser();
  for await (const chunk of body) {
    for (const event of parser.push(chunk)) yield event;
  }
  for (const event of parser.end()) yield event;
}
