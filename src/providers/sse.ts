/**
 * A Server-Sent Events parser (the WHATWG `text/event-stream` rules), incremental: feed it bytes
 * as they arrive, however the network splits them, and it yields whole events.
 *
 * Lines end in CRLF, LF or CR (a CR at the end of one chunk and an LF at the start of the next
 * are one line ending); lines starting with `:` are comments; `data` lines join with `\n`; one
 * space after the colon is dropped; a blank line dispatches the event; an event with no data is
 * not dispatched; whatever is pending when the stream ends is discarded, as the spec says.
 *
 * Bounded, unlike the spec: a line or an event's data longer than `maxLine` throws SseLimitError.
 */

/** One dispatched event. `event` defaults to "message". */
export interface SseEvent {
  event: string;
  data: string;
  id?: string;
  /** The server's reconnection time in ms, when it sent one. */
  retry?: number;
}

export interface SseParserOptions {
  /**
   * The longest line, and the longest data of one event, in characters. Default 8 Mi. A server
   * that sends more without a line end (or a blank line) is broken or hostile: holding it all
   * would cost memory without bound.
   */
  maxLine?: number;
}

/** Default of `SseParserOptions.maxLine`. */
export const SSE_MAX_LINE = 8 * 1024 * 1024;

/** Thrown by the parser when a line or an event passes `maxLine`. */
export class SseLimitError extends Error {
  override readonly name = 'SseLimitError';
  readonly code = 'SSE_LIMIT';
  constructor(
    readonly what: 'line' | 'event',
    readonly limit: number,
  ) {
    super(`an SSE ${what} is longer than ${limit} characters (the limit of one ${what})`);
  }
}

/**
 * The incremental parser.
 *
 * @example
 * const parser = new SseParser();
 * parser.push('event: ping\ndata: {}\n\n'); // [{ event: 'ping', data: '{}' }]
 */
export class SseParser {
  /**
   * Made only when a chunk ends inside a character (its tail waits for the next chunk). Until
   * then each chunk is whole UTF-8 and Buffer decodes it: a TextDecoder per stream (an ICU
   * converter) cost more than the rest of a short reply's decoding, for every call.
   */
  private decoder: InstanceType<typeof TextDecoder> | undefined;
  /** Bytes have arrived: a BOM is stripped only at the start of the stream, as TextDecoder does. */
  private sawBytes = false;
  private readonly maxLine: number;
  /**
   * The start of a line whose end has not arrived, in pieces: each chunk is scanned once, so a
   * long line costs time in proportion to its length, not to its length times its chunks.
   */
  private partial: string[] = [];
  private partialLength = 0;
  /** The previous chunk ended in CR: an LF at the start of the next one belongs to it. */
  private pendingCR = false;
  private sawFirstChunk = false;
  private eventType = '';
  private data: string[] = [];
  private dataLength = 0;
  private lastId: string | undefined;
  private retry: number | undefined;

  constructor(options: SseParserOptions = {}) {
    this.maxLine = options.maxLine ?? SSE_MAX_LINE;
  }

  /** Feeds a chunk (bytes or text); returns the events it completed, in order. Throws SseLimitError. */
  push(chunk: Uint8Array | string): SseEvent[] {
    let text = typeof chunk === 'string' ? chunk : this.decode(chunk);
    if (!this.sawFirstChunk && text.length > 0) {
      this.sawFirstChunk = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (this.pendingCR && text.startsWith('\n')) text = text.slice(1);
    this.pendingCR = false;

    const events: SseEvent[] = [];
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      let line = text.slice(start, i);
      if (this.partialLength > 0) {
        this.partial.push(line);
        line = this.partial.join('');
        this.partial = [];
        this.partialLength = 0;
      }
      if (line.length > this.maxLine) throw new SseLimitError('line', this.maxLine);
      if (c === 13) {
        if (i + 1 < text.length) {
          if (text.charCodeAt(i + 1) === 10) i++;
        } else {
          this.pendingCR = true;
        }
      }
      start = i + 1;
      const event = this.line(line);
      if (event) events.push(event);
    }
    if (start < text.length) {
      this.partialLength += text.length - start;
      if (this.partialLength > this.maxLine) throw new SseLimitError('line', this.maxLine);
      this.partial.push(text.slice(start));
    }
    return events;
  }

  /** A chunk as text; what TextDecoder's stream mode would give, with a decoder only when needed. */
  private decode(chunk: Uint8Array): string {
    if (this.decoder) return this.decoder.decode(chunk, { stream: true });
    const atStart = !this.sawBytes;
    if (chunk.byteLength === 0) return '';
    this.sawBytes = true;
    if (endsInsideCharacter(chunk)) {
      // Later BOMs are text: only a decoder made at the very start may strip one.
      this.decoder = new TextDecoder('utf-8', { ignoreBOM: !atStart });
      return this.decoder.decode(chunk, { stream: true });
    }
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const bom = atStart && bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
    return bytes.toString('utf8', bom ? 3 : 0);
  }

  /** Ends the stream: flushes the decoder; an event without its blank line is dropped. */
  end(): SseEvent[] {
    const rest = this.decoder?.decode() ?? '';
    const events = rest ? this.push(rest) : [];
    this.partial = [];
    this.partialLength = 0;
    this.data = [];
    this.dataLength = 0;
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
        // The joining newlines count: the event's data is what the adapter will hold.
        this.dataLength += value.length + (this.data.length > 0 ? 1 : 0);
        if (this.dataLength > this.maxLine) throw new SseLimitError('event', this.maxLine);
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
    this.dataLength = 0;
    if (!hasData) return undefined;
    if (this.lastId !== undefined) event.id = this.lastId;
    if (this.retry !== undefined) event.retry = this.retry;
    return event;
  }
}

/**
 * Whether a chunk may end with the start of a multi-byte character (a lead byte in its last three
 * bytes with fewer bytes after it than it needs). Erring towards true only costs a decoder.
 */
function endsInsideCharacter(bytes: Uint8Array): boolean {
  const n = bytes.length;
  for (let back = 1; back <= 3 && back <= n; back++) {
    const b = bytes[n - back]!;
    if (b < 0x80) return false;
    if (b >= 0xc0) return (b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2) > back;
  }
  return false;
}

/**
 * The events of a byte stream, as they complete.
 *
 * @example
 * for await (const event of readSse(response.body)) console.log(event.event, event.data);
 */
export async function* readSse(body: AsyncIterable<Uint8Array | string>, options: SseParserOptions = {}): AsyncGenerator<SseEvent> {
  const parser = new SseParser(options);
  for await (const chunk of body) {
    for (const event of parser.push(chunk)) yield event;
  }
  for (const event of parser.end()) yield event;
}
