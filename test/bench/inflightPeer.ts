/**
 * The inflight benchmark's yardstick: the same calls made by a plain program, as someone using an
 * SDK would write it (an undici Pool, a p-limit-style bound on calls in flight, a streamed
 * Messages call read as SSE) with no swarmstate code on its path. Against the same simulator
 * process, its makespan is what this machine can reach at all (the simulator's own CPU and the
 * connections are in it), so the runtime is measured against it as well as against the ideal.
 */
import { Pool } from 'undici';

/** Runs at most `max` of the tasks given to it at once, in the order given (what p-limit does). */
export function limit(max: number): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0;
  const queue: (() => void)[] = [];
  const next = () => {
    if (active >= max) return;
    const start = queue.shift();
    if (!start) return;
    active++;
    start();
  };
  return (task) =>
    new Promise((resolve, reject) => {
      queue.push(() =>
        void task()
          .then(resolve, reject)
          .finally(() => {
            active--;
            next();
          }),
      );
      next();
    });
}

/** One streamed Messages call; resolves to the reply's text. Throws on a non-200 or a stream cut short. */
export async function peerCall(pool: Pool, prompt: string, maxTokens: number): Promise<string> {
  const res = await pool.request({
    method: 'POST',
    path: '/v1/messages',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'anthropic-version': '2023-06-01', 'x-api-key': 'peer' },
    // The body the runtime sends for such a task (its cache breakpoint on the first user message
    // included), so the simulator does the same work for both.
    body: JSON.stringify({ model: 'sim-fast', max_tokens: maxTokens, messages: [{ role: 'user', content: [{ type: 'text', text: prompt, cache_control: { type: 'ephemeral' } }] }], stream: true }),
  });
  const decoder = new TextDecoder();
  let buffered = '';
  let text = '';
  let stopped = false;
  for await (const chunk of res.body) {
    buffered += decoder.decode(chunk as Uint8Array, { stream: true });
    let end: number;
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      const frame = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = frame.split('\n').find((line) => line.startsWith('data: '));
      if (!data) continue;
      const event = JSON.parse(data.slice(6)) as { type: string; delta?: { type: string; text?: string } };
      if (event.type === 'content_block_delta' && event.delta?.type === 'text_delta') text += event.delta.text ?? '';
      else if (event.type === 'message_stop') stopped = true;
      else if (event.type === 'error') throw new Error(`peer: stream error ${data}`);
    }
  }
  if (res.statusCode !== 200) throw new Error(`peer: HTTP ${res.statusCode}`);
  if (!stopped) throw new Error('peer: the stream ended without message_stop');
  return text;
}

/** Makes `n` calls (prompt i: `prompt(i)`) on `pool`, at most `maxInFlight` at once. */
export async function peerRun(pool: Pool, n: number, maxInFlight: number, prompt: (i: number) => string, maxTokens: number): Promise<void> {
  const bounded = limit(maxInFlight);
  const texts = await Promise.all(Array.from({ length: n }, (_, i) => bounded(() => peerCall(pool, prompt(i), maxTokens))));
  if (texts.some((t) => t === '')) throw new Error('peer: an empty reply');
}
