/**
 * `[[sim:replies A || B || C]]` over real HTTP, on both protocols: the k-th request carrying the
 * directive text gets item min(k, n), counted on the server across keys; failed requests (401,
 * 429, directive errors, injected faults) do not advance the count.
 */
import { describe, expect, it } from 'vitest';
import { chatBody, chatUrl, manualClock, messagesBody, messagesUrl, post, sseEvents, useSims } from './helpers.js';

const sim = useSims();
const messages = messagesUrl;
const chat = chatUrl;
const REVIEW = '[[sim:replies REVISE: add tests || APPROVE]]';

/** The reply text of an Anthropic answer, plain or streamed. */
function anthropicText(res: { json: any; text: string; headers: Headers }): string {
  if (!String(res.headers.get('content-type')).includes('event-stream')) return res.json.content.map((b: { text?: string }) => b.text ?? '').join('');
  return sseEvents(res.text)
    .filter((e) => e.event === 'content_block_delta' && e.data.delta.type === 'text_delta')
    .map((e) => e.data.delta.text)
    .join('');
}

/** The reply text of an OpenAI answer, plain or streamed. */
function openaiText(res: { json: any; text: string; headers: Headers }): string {
  if (!String(res.headers.get('content-type')).includes('event-stream')) return res.json.choices[0].message.content ?? '';
  return sseEvents(res.text)
    .filter((e) => typeof e.data === 'object' && e.data.choices?.[0]?.delta?.content)
    .map((e) => e.data.choices[0].delta.content)
    .join('');
}

describe('[[sim:replies A || B]]', () => {
  it('Anthropic: the first review asks for changes, the second and later approve, across keys and streamed or not', async () => {
    const s = await sim({ keys: { 'sk-one': {}, 'sk-two': {} } });
    const first = await post(messages(s), messagesBody(`Review the patch. ${REVIEW}`), { key: 'sk-one' });
    expect(first.status).toBe(200);
    expect(anthropicText(first)).toBe('REVISE: add tests');
    // Another conversation, another key, streamed: the count is per directive text only.
    const second = await post(messages(s), messagesBody(`Review the revised patch. ${REVIEW}`, { stream: true }), { key: 'sk-two' });
    expect(second.status).toBe(200);
    expect(anthropicText(second)).toBe('APPROVE');
    const third = await post(messages(s), messagesBody(`Review the patch. ${REVIEW}`), { key: 'sk-one' });
    expect(anthropicText(third)).toBe('APPROVE');
    // Another directive text has its own count.
    const other = await post(messages(s), messagesBody('[[sim:replies one || two || three]]'), { key: 'sk-two' });
    expect(anthropicText(other)).toBe('one');
    const spaced = await post(messages(s), messagesBody('[[sim:replies  one||two||three ]]'), { key: 'sk-two' });
    expect(anthropicText(spaced)).toBe('one');
  });

  it('OpenAI: the same sequence, streamed and not', async () => {
    const s = await sim();
    const texts: string[] = [];
    for (const stream of [true, false, true, false]) {
      const res = await post(chat(s), chatBody(`Review it. [[sim:replies first || second || third]]`, stream ? { stream: true } : {}), { bearer: 'sk-any' });
      expect(res.status).toBe(200);
      texts.push(openaiText(res));
    }
    expect(texts).toEqual(['first', 'second', 'third', 'third']);
  });

  it('counts one directive text across both protocols', async () => {
    const s = await sim();
    const a = await post(messages(s), messagesBody('[[sim:replies A || B || C]]'));
    const o = await post(chat(s), chatBody('[[sim:replies A || B || C]]'));
    const a2 = await post(messages(s), messagesBody('again [[sim:replies A || B || C]]', { stream: true }));
    expect([anthropicText(a), openaiText(o), anthropicText(a2)]).toEqual(['A', 'B', 'C']);
  });

  it('does not count 401s, 429s or [[sim:error]] answers: a retry gets the same item', async () => {
    const clock = manualClock();
    const s = await sim({ keys: { good: {}, once: { rpm: 1 } }, now: clock.now });
    const body = messagesBody(`Review. ${REVIEW}`);
    expect((await post(messages(s), body, { key: 'wrong' })).status).toBe(401);
    expect(anthropicText(await post(messages(s), body, { key: 'once' }))).toBe('REVISE: add tests');
    expect((await post(messages(s), body, { key: 'once' })).status).toBe(429);
    expect((await post(chat(s), chatBody(`Review. ${REVIEW}`), { bearer: 'once' })).status).toBe(429);
    expect(openaiText(await post(chat(s), chatBody(`Review. ${REVIEW}`), { bearer: 'good' }))).toBe('APPROVE');

    const flaky = messagesBody('[[sim:error 529 2]] [[sim:replies x || y]]');
    const statuses: number[] = [];
    for (let i = 0; i < 2; i++) statuses.push((await post(messages(s), flaky, { key: 'good' })).status);
    expect(statuses).toEqual([529, 529]);
    expect(anthropicText(await post(messages(s), flaky, { key: 'good' }))).toBe('x');
    expect(anthropicText(await post(messages(s), flaky, { key: 'good' }))).toBe('y');
  });

  it('does not count injected faults: http500, http529 and reset leave the count where it was', async () => {
    const s = await sim({ seed: 2, faults: { http500: 0.25, http529: 0.25, reset: 0.25 } });
    const outcomes: string[] = [];
    // Different prompts, one directive text: each draws its own faults, the count is shared.
    for (let i = 0; outcomes.filter((o) => !o.startsWith('!')).length < 3 && i < 60; i++) {
      const protocol = i % 2 === 0 ? 'anthropic' : 'openai';
      const prompt = `probe ${i} [[sim:replies x || y || z]]`;
      const res = await (protocol === 'anthropic' ? post(messages(s), messagesBody(prompt)) : post(chat(s), chatBody(prompt))).catch(() => undefined);
      if (!res) outcomes.push('!reset');
      else if (res.status !== 200) outcomes.push(`!${res.status}`);
      else outcomes.push(protocol === 'anthropic' ? anthropicText(res) : openaiText(res));
    }
    expect(outcomes.filter((o) => !o.startsWith('!'))).toEqual(['x', 'y', 'z']);
    // Seed 2 makes faults of every kind strike before the first success and between successes.
    expect(outcomes[0]!.startsWith('!')).toBe(true);
    expect(outcomes.indexOf('y') - outcomes.indexOf('x')).toBeGreaterThan(1);
    expect(new Set(outcomes.filter((o) => o.startsWith('!')))).toEqual(new Set(['!500', '!529', '!503', '!reset']));
  });

  it('does not count a stream that fails mid-way (streamError): its retry gets the same item', async () => {
    // streamError strikes streams only: the failed streams do not count, the plain answers do.
    const s = await sim({ faults: { streamError: 1 } });
    const broken = await post(messages(s), messagesBody('[[sim:replies x || y || z]]', { stream: true }));
    expect(broken.status).toBe(200);
    expect(sseEvents(broken.text).some((e) => e.event === 'error')).toBe(true);
    await post(chat(s), chatBody('[[sim:replies x || y || z]]', { stream: true })).catch(() => undefined);
    expect(anthropicText(await post(messages(s), messagesBody('[[sim:replies x || y || z]]')))).toBe('x');
    expect(openaiText(await post(chat(s), chatBody('[[sim:replies x || y || z]]')))).toBe('y');
    expect(s.stats().faults).toBe(2);
  });

  it('refuses an empty directive, an empty item, two of them, or one combined with [[sim:reply]]', async () => {
    const s = await sim();
    for (const prompt of ['[[sim:replies]]', '[[sim:replies A || ]]', '[[sim:replies A || B]] [[sim:replies C]]', '[[sim:reply A]] [[sim:replies B || C]]']) {
      const a = await post(messages(s), messagesBody(prompt));
      expect(a.status, prompt).toBe(400);
      expect(a.json.error.message, prompt).toMatch(/^sim: /);
      const o = await post(chat(s), chatBody(prompt));
      expect(o.status, prompt).toBe(400);
    }
    // Refused requests did not count either.
    expect(anthropicText(await post(messages(s), messagesBody('[[sim:replies A || B]]')))).toBe('A');
  });
});
