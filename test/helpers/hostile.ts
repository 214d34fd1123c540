/**
 * A hostile provider server for the adapter tests: a tiny node:http server on 127.0.0.1 (port
 * 0) that answers both wire protocols (Anthropic for a path ending in `/v1/messages`, OpenAI
 * for `/chat/completions`), streamed when the request says `stream: true`, in one of these
 * modes (set at start or with `setMode`):
 *
 * | mode | answer |
 * |---|---|
 * | `unknown-events` | a valid reply ("hello") with events of unknown types whose data is not JSON between its events |
 * | `bad-json` | a reply whose needed event (a content delta) carries broken JSON |
 * | `endless` | HTTP 200 SSE, then bytes until the client goes away: `shape: 'line'` one line that never ends, `'pings'` comment lines (valid SSE, never an event). `pace: 'trickle'` writes one small piece per event-loop turn, `'flood'` as fast as the socket takes them |
 * | `huge` | a valid reply whose text is `bytes` long (default 100 MB), streamed or one JSON body, made piece by piece as the socket drains: nothing is held, and it stops when the client disconnects |
 * | `echo` | echoes the request's API key: `status` 200 (default) in the reply's text, any other status in an error body (`{"error": {"message": "... <key> ..."}}`) |
 * | `sparse-tool-index` | a tool-call reply whose calls have the given `indexes` (default [200000000]): OpenAI `tool_calls[].index`, Anthropic content block indexes |
 *
 * The server never stops an endless or huge answer by itself: the test ends it by closing the
 * call (or the server). `responses` records, per request, the bytes written and whether the
 * server finished the answer or the client left first; `closed(n)` waits for the n-th
 * response (1-based) to be over.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type HostileMode =
  | { mode: 'unknown-events' }
  | { mode: 'bad-json' }
  | { mode: 'endless'; shape: 'line' | 'pings'; pace?: 'trickle' | 'flood' }
  | { mode: 'huge'; bytes?: number }
  | { mode: 'echo'; status?: number }
  | { mode: 'sparse-tool-index'; indexes?: number[] };

export interface HostileResponse {
  protocol: 'anthropic' | 'openai';
  /** Body bytes written so far. */
  bytes: number;
  /** The server wrote the whole answer. */
  finished: boolean;
  /** The connection closed before the server finished (the client left). */
  abandoned: boolean;
}

export interface HostileServer {
  /** http://127.0.0.1:<port> */
  url: string;
  responses: HostileResponse[];
  setMode(mode: HostileMode): void;
  /** Resolves once the n-th response (1-based) has finished or its client has left. */
  closed(n: number): Promise<HostileResponse>;
  close(): Promise<void>;
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };
const PIECE = 16 * 1024;

function keyOf(req: IncomingMessage): string {
  const apiKey = req.headers['x-api-key'];
  if (typeof apiKey === 'string') return apiKey;
  const auth = req.headers.authorization;
  return typeof auth === 'string' ? auth.replace(/^Bearer /, '') : '';
}

const sse = (event: string | undefined, data: unknown) =>
  `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

/** Anthropic events around a reply: what comes before its content, and after. */
const anthropic = {
  head: () => sse('message_start', { type: 'message_start', message: { id: 'msg_hostile', type: 'message', role: 'assistant', content: [], usage: { input_tokens: 5, output_tokens: 0 } } }),
  textStart: (index: number) => sse('content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } }),
  text: (index: number, text: string) => sse('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text } }),
  tool: (index: number) =>
    sse('content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: `toolu_${index}`, name: 'read_file', input: {} } }) +
    sse('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: `{"path":"f${index}"}` } }),
  tail: (stop: string) =>
    sse('message_delta', { type: 'message_delta', delta: { stop_reason: stop }, usage: { output_tokens: 3 } }) + sse('message_stop', { type: 'message_stop' }),
};

const openai = {
  chunk: (delta: Record<string, unknown>, finish: string | null = null) =>
    sse(undefined, { id: 'chatcmpl-hostile', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] }),
  tail: (finish: string) =>
    openai.chunk({}, finish) + sse(undefined, { id: 'chatcmpl-hostile', choices: [], usage: { prompt_tokens: 5, completion_tokens: 3 } }) + sse(undefined, '[DONE]'),
};

/** The pieces of one answer, made one at a time; undefined when it is over. */
type Pieces = () => string | undefined;

function fromList(list: string[]): Pieces {
  let i = 0;
  return () => list[i++];
}

function streamed(protocol: HostileResponse['protocol'], mode: HostileMode): Pieces {
  switch (mode.mode) {
    case 'unknown-events': {
      const junk = sse('hostile_unknown', '<<not json at all>>') + sse('ping', 'still not json');
      return fromList(
        protocol === 'anthropic'
          ? [junk, anthropic.head(), junk, anthropic.textStart(0), junk, anthropic.text(0, 'hello'), junk, anthropic.tail('end_turn'), junk]
          : [junk, openai.chunk({ role: 'assistant', content: '' }), junk, openai.chunk({ content: 'hello' }), junk, openai.tail('stop'), junk],
      );
    }
    case 'bad-json':
      return fromList(
        protocol === 'anthropic'
          ? [anthropic.head(), anthropic.textStart(0), 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,\n\n', anthropic.tail('end_turn')]
          : [openai.chunk({ role: 'assistant', content: '' }), 'data: {"choices":[{"delta":\n\n', openai.tail('stop')],
      );
    case 'endless': {
      let first = true;
      return () => {
        if (mode.shape === 'pings') return ': keep-alive\n';
        const piece = `${first ? 'data: ' : ''}${'x'.repeat(mode.pace === 'flood' ? PIECE : 64)}`;
        first = false;
        return piece;
      };
    }
    case 'huge': {
      let left = mode.bytes ?? 100_000_000;
      const text = 'x'.repeat(PIECE);
      const pieces = protocol === 'anthropic' ? [anthropic.head(), anthropic.textStart(0)] : [openai.chunk({ role: 'assistant', content: '' })];
      return () => {
        if (pieces.length > 0) return pieces.shift();
        if (left > 0) {
          left -= PIECE;
          return protocol === 'anthropic' ? anthropic.text(0, text) : openai.chunk({ content: text });
        }
        if (left === -Infinity) return undefined;
        left = -Infinity;
        return protocol === 'anthropic' ? anthropic.tail('end_turn') : openai.tail('stop');
      };
    }
    case 'echo':
      throw new Error('echo answers are written whole');
    case 'sparse-tool-index': {
      const indexes = mode.indexes ?? [200_000_000];
      return fromList(
        protocol === 'anthropic'
          ? [anthropic.head(), ...indexes.map(anthropic.tool), anthropic.tail('tool_use')]
          : [
              openai.chunk({ role: 'assistant', content: null }),
              ...indexes.map((index) =>
                openai.chunk({ tool_calls: [{ index, id: `call_${index}`, type: 'function', function: { name: 'read_file', arguments: `{"path":"f${index}"}` } }] }),
              ),
              openai.tail('tool_calls'),
            ],
      );
    }
  }
}

/** A plain JSON reply whose text is `bytes` long, made piece by piece. */
function hugeJson(protocol: HostileResponse['protocol'], bytes: number): Pieces {
  const [head, tail] =
    protocol === 'anthropic'
      ? ['{"id":"msg_huge","type":"message","role":"assistant","content":[{"type":"text","text":"', '"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":5}}']
      : ['{"id":"chatcmpl-huge","choices":[{"index":0,"message":{"role":"assistant","content":"', '"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5}}'];
  const text = 'x'.repeat(PIECE);
  let left = bytes;
  const pieces: (string | undefined)[] = [head];
  return () => {
    if (pieces.length > 0) return pieces.shift();
    if (left > 0) {
      left -= PIECE;
      if (left <= 0) pieces.push(tail, undefined);
      return text;
    }
    return undefined;
  };
}

function echo(res: ServerResponse, record: HostileResponse, protocol: HostileResponse['protocol'], stream: boolean, key: string, status: number): void {
  let body: string;
  let headers: Record<string, string> = { 'content-type': 'application/json' };
  if (status !== 200) {
    body = JSON.stringify(
      protocol === 'anthropic'
        ? { type: 'error', error: { type: 'authentication_error', message: `invalid x-api-key: ${key}` } }
        : { error: { message: `Incorrect API key provided: ${key}`, type: 'invalid_request_error', code: 'invalid_api_key' } },
    );
  } else if (stream) {
    headers = SSE_HEADERS;
    const text = `your key is ${key}`;
    body =
      protocol === 'anthropic'
        ? anthropic.head() + anthropic.textStart(0) + anthropic.text(0, text) + anthropic.tail('end_turn')
        : openai.chunk({ role: 'assistant', content: text }) + openai.tail('stop');
  } else {
    const text = `your key is ${key}`;
    body = JSON.stringify(
      protocol === 'anthropic'
        ? { id: 'msg_echo', type: 'message', role: 'assistant', content: [{ type: 'text', text }], stop_reason: 'end_turn', usage: { input_tokens: 5, output_tokens: 5 } }
        : { id: 'chatcmpl-echo', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }], usage: { prompt_tokens: 5, completion_tokens: 5 } },
    );
  }
  res.writeHead(status, headers);
  record.bytes += Buffer.byteLength(body);
  record.finished = true;
  res.end(body);
}

/** Writes the pieces, honouring backpressure; `trickle` writes one piece per event-loop turn. */
function pump(res: ServerResponse, record: HostileResponse, next: Pieces, trickle: boolean): void {
  const write = (): void => {
    while (!res.destroyed) {
      const piece = next();
      if (piece === undefined) {
        record.finished = true;
        res.end();
        return;
      }
      record.bytes += Buffer.byteLength(piece);
      const more = res.write(piece);
      if (!more) return void res.once('drain', write);
      if (trickle) return void setImmediate(write);
    }
  };
  write();
}

export async function startHostile(initial: HostileMode): Promise<HostileServer> {
  let mode = initial;
  const responses: HostileResponse[] = [];
  const done: Promise<HostileResponse>[] = [];
  /** closed(n) calls made before the n-th request arrived. */
  const waiting: { n: number; resolve: (r: Promise<HostileResponse>) => void }[] = [];
  const sockets = new Set<Socket>();

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      } catch {
        // A hostile server does not care what it was sent.
      }
      const protocol = (req.url ?? '').endsWith('/chat/completions') ? 'openai' : 'anthropic';
      const record: HostileResponse = { protocol, bytes: 0, finished: false, abandoned: false };
      responses.push(record);
      done.push(
        new Promise((resolve) =>
          res.on('close', () => {
            record.abandoned = !record.finished;
            resolve(record);
          }),
        ),
      );
      for (const waiter of waiting.filter((w) => w.n === done.length)) waiter.resolve(done[done.length - 1]!);
      if (mode.mode === 'echo') return echo(res, record, protocol, body.stream === true, keyOf(req), mode.status ?? 200);
      if (mode.mode === 'huge' && body.stream !== true) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return pump(res, record, hugeJson(protocol, mode.bytes ?? 100_000_000), false);
      }
      res.writeHead(200, SSE_HEADERS);
      pump(res, record, streamed(protocol, mode), mode.mode === 'endless' && mode.pace !== 'flood');
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    responses,
    setMode(next) {
      mode = next;
    },
    closed(n) {
      if (done.length >= n) return done[n - 1]!;
      return new Promise<Promise<HostileResponse>>((resolve) => waiting.push({ n, resolve })).then((p) => p);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
