/**
 * A loopback HTTP proxy in front of the simulator that keeps every request body as it went over
 * the wire (either protocol), so a test can see exactly what a provider adapter sent.
 *
 * @example
 * const proxy = await recordingProxy(sim.url);
 * // plan: { type: 'sim', baseURL: proxy.url, sim: { protocol: 'openai' } }
 * proxy.bodies.filter((b) => b.call.startsWith('t1;'));
 * await proxy.close();
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  path: string;
  /** `x-swarmstate-call`: `<task id>;<attempt>;<turn>`. */
  call: string;
  body: Record<string, unknown>;
}

export async function recordingProxy(target: string): Promise<{ url: string; requests: RecordedRequest[]; close(): Promise<void> }> {
  const requests: RecordedRequest[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const call = typeof req.headers['x-swarmstate-call'] === 'string' ? decodeURIComponent(req.headers['x-swarmstate-call']) : '';
    requests.push({ path: req.url ?? '', call, body: JSON.parse(raw) as Record<string, unknown> });
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'content-length' && k !== 'connection') headers[k] = v;
    const upstream = await fetch(`${target}${req.url ?? ''}`, { method: req.method ?? 'POST', headers, body: raw });
    const out: Record<string, string> = {};
    upstream.headers.forEach((v, k) => {
      if (k !== 'content-length' && k !== 'transfer-encoding' && k !== 'connection' && k !== 'content-encoding') out[k] = v;
    });
    const text = await upstream.text();
    res.writeHead(upstream.status, out);
    res.end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
