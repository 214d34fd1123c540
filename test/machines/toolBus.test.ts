import { getShortestPaths } from '@xstate/graph';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor, createEmptyActor, createMachine, fromPromise, SimulatedClock } from 'xstate';
import type { AnyActorRef } from 'xstate';
import { toolCallKey } from '../../machines/canonical.js';
import type { RunEvent, ToolBusEvent, ToolBusReply, ToolExecInput } from '../../machines/protocol.js';
import { toolBusMachine } from '../../machines/toolBus.machine.js';
import type { ToolBusContext } from '../../machines/toolBus.machine.js';

const TOOLS = [
  { name: 'read_file', shareable: true },
  { name: 'write_file', shareable: false },
];

/** An execution the test finishes by hand. */
interface Running {
  input: ToolExecInput;
  resolve: (output: unknown) => void;
  reject: (error: unknown) => void;
}

/** A bus whose executor waits for the test, plus an agent that collects TOOL.RESULTs. */
function harness(opts: { tools?: { name: string; shareable: boolean }[]; realExecutor?: boolean } = {}) {
  const clock = new SimulatedClock();
  const running: Running[] = [];
  const reports: RunEvent[] = [];
  const results = new Map<string, ToolBusReply[]>();
  const waiting = new Map<string, (reply: ToolBusReply) => void>();
  const agent = createActor(
    createMachine({
      on: {
        '*': {
          actions: ({ event }) => {
            const reply = event as ToolBusReply;
            results.set(reply.callId, [...(results.get(reply.callId) ?? []), reply]);
            waiting.get(reply.callId)?.(reply);
          },
        },
      },
    }),
  ).start();
  const executeTool = fromPromise<string, ToolExecInput>(
    ({ input }) => new Promise<string>((resolve, reject) => void running.push({ input, resolve: resolve as (o: unknown) => void, reject })),
  );
  const machine = opts.realExecutor
    ? toolBusMachine.provide({ actions: { report: (_, e: RunEvent) => void reports.push(e) } })
    : toolBusMachine.provide({ actors: { executeTool }, actions: { report: (_, e: RunEvent) => void reports.push(e) } });
  const bus = createActor(machine, { clock, input: { tools: opts.tools ?? TOOLS } }).start();
  let nextCall = 0;
  return {
    clock,
    bus,
    running,
    reports,
    results,
    /** Sends a call; returns its callId. */
    call(name: string, args: unknown, taskId = 't1'): string {
      const callId = `c${nextCall++}`;
      bus.send({ type: 'TOOL.CALL', callId, taskId, name, args, replyTo: agent });
      return callId;
    },
    /** Resolves with the first TOOL.RESULT of `callId`, now or when it comes. */
    result(callId: string): Promise<ToolBusReply> {
      const got = results.get(callId)?.[0];
      if (got) return Promise.resolve(got);
      return new Promise((resolve) => waiting.set(callId, resolve));
    },
    context: (): ToolBusContext => bus.getSnapshot().context,
  };
}

describe('toolBusMachine: sharing', () => {
  it('runs two identical shareable calls in flight once and answers both', async () => {
    const h = harness();
    const a = h.call('read_file', { path: 'a.ts' }, 't1');
    const b = h.call('read_file', { path: 'a.ts' }, 't2');
    expect(h.running).toHaveLength(1);
    expect(h.running[0].input).toEqual({ name: 'read_file', args: { path: 'a.ts' } });
    h.clock.increment(25);
    h.running[0].resolve('contents of a.ts');
    expect(await h.result(a)).toEqual({ type: 'TOOL.RESULT', callId: a, content: 'contents of a.ts', isError: false });
    expect(await h.result(b)).toEqual({ type: 'TOOL.RESULT', callId: b, content: 'contents of a.ts', isError: false });
    expect(h.context().stats).toEqual({ requested: 2, executed: 1, deduplicated: 1, failed: 0 });
    expect(h.reports).toEqual([
      { type: 'tool:called', taskId: 't1', name: 'read_file', shared: false },
      { type: 'tool:called', taskId: 't2', name: 'read_file', shared: true },
      { type: 'tool:result', name: 'read_file', isError: false, durationMs: 25 },
    ]);
  });

  it('shares whatever the order of the argument keys, at any depth', () => {
    const h = harness();
    h.call('read_file', { path: 'a.ts', range: { start: 1, end: 9 } });
    h.call('read_file', { range: { end: 9, start: 1 }, path: 'a.ts' });
    expect(h.running).toHaveLength(1);
    expect(h.context().stats.deduplicated).toBe(1);
  });

  it('runs calls with different arguments separately', () => {
    const h = harness();
    h.call('read_file', { path: 'a.ts' });
    h.call('read_file', { path: 'b.ts' });
    expect(h.running.map((r) => r.input.args)).toEqual([{ path: 'a.ts' }, { path: 'b.ts' }]);
  });

  it('never shares a tool that is not shareable', async () => {
    const h = harness();
    const a = h.call('write_file', { path: 'a.ts', text: 'x' });
    const b = h.call('write_file', { path: 'a.ts', text: 'x' });
    expect(h.running).toHaveLength(2);
    h.running[1].resolve('second');
    h.running[0].resolve('first');
    expect((await h.result(a)).content).toBe('first');
    expect((await h.result(b)).content).toBe('second');
    expect(h.context().stats).toEqual({ requested: 2, executed: 2, deduplicated: 0, failed: 0 });
  });

  it('runs an identical call again once the first has finished (no result cache)', async () => {
    const h = harness();
    const a = h.call('read_file', { path: 'a.ts' });
    h.running[0].resolve('v1');
    await h.result(a);
    const b = h.call('read_file', { path: 'a.ts' });
    expect(h.running).toHaveLength(2);
    h.running[1].resolve('v2');
    expect((await h.result(b)).content).toBe('v2');
    expect(h.context().stats.executed).toBe(2);
  });

  it('runs a shareable call whose arguments have no JSON spelling on its own instead of failing', async () => {
    const h = harness();
    const cyclic: Record<string, unknown> = { path: 'a.ts' };
    cyclic.self = cyclic;
    const a = h.call('read_file', cyclic);
    const b = h.call('read_file', cyclic);
    expect(h.running).toHaveLength(2);
    expect(h.bus.getSnapshot().status).toBe('active');
    h.running[0].resolve('x');
    h.running[1].resolve('y');
    expect((await h.result(a)).content).toBe('x');
    expect((await h.result(b)).content).toBe('y');
  });
});

describe('toolBusMachine: failures', () => {
  it('answers every waiter with the error when the executor throws, and keeps working', async () => {
    const h = harness();
    const a = h.call('read_file', { path: 'missing.ts' });
    const b = h.call('read_file', { path: 'missing.ts' });
    h.running[0].reject(new Error('ENOENT: missing.ts'));
    expect(await h.result(a)).toEqual({ type: 'TOOL.RESULT', callId: a, content: 'ENOENT: missing.ts', isError: true });
    expect(await h.result(b)).toEqual({ type: 'TOOL.RESULT', callId: b, content: 'ENOENT: missing.ts', isError: true });
    expect(h.bus.getSnapshot().status).toBe('active');
    expect(h.context().stats).toEqual({ requested: 2, executed: 1, deduplicated: 1, failed: 1 });
    expect(h.reports.at(-1)).toMatchObject({ type: 'tool:result', name: 'read_file', isError: true });

    const c = h.call('read_file', { path: 'missing.ts' });
    h.running[1].resolve('found now');
    expect(await h.result(c)).toMatchObject({ content: 'found now', isError: false });
  });

  it('turns any rejection value into a message', async () => {
    const h = harness();
    const a = h.call('write_file', 1);
    const b = h.call('write_file', 2);
    const c = h.call('write_file', 3);
    h.running[0].reject({ code: 'tool_error', message: 'server said no', retryable: false });
    h.running[1].reject('plain string');
    h.running[2].reject({ status: 500 });
    expect((await h.result(a)).content).toBe('server said no');
    expect((await h.result(b)).content).toBe('plain string');
    expect((await h.result(c)).content).toBe('tool failed: {"status":500}');
  });

  it('writes a non-string output as canonical JSON', async () => {
    const h = harness();
    const a = h.call('read_file', {});
    h.running[0].resolve({ b: 1, a: [true] });
    expect((await h.result(a)).content).toBe('{"a":[true],"b":1}');
  });

  it('answers an unknown tool at once with an error naming it', () => {
    const h = harness();
    const a = h.call('rm_rf', { path: '/' });
    expect(h.running).toHaveLength(0);
    const reply = h.results.get(a)?.[0];
    expect(reply?.isError).toBe(true);
    expect(reply?.content).toMatch(/^unknown tool "rm_rf"/);
    expect(reply?.content).toContain('read_file, write_file');
    expect(h.context().stats).toEqual({ requested: 1, executed: 0, deduplicated: 0, failed: 0 });
  });

  it('does not mistake Object.prototype names for tools', () => {
    const h = harness();
    const a = h.call('constructor', {});
    const b = h.call('__proto__', {});
    expect(h.results.get(a)?.[0].isError).toBe(true);
    expect(h.results.get(b)?.[0].isError).toBe(true);
    expect(h.running).toHaveLength(0);
  });

  it('without a provided executor, answers with "no tool executor provided"', async () => {
    const h = harness({ realExecutor: true });
    const a = h.call('read_file', {});
    expect(await h.result(a)).toMatchObject({ content: 'no tool executor provided', isError: true });
    expect(h.bus.getSnapshot().status).toBe('active');
  });

  it('stays active on done/error events of children it does not know', () => {
    const h = harness();
    h.bus.send({ type: 'xstate.error.actor.stranger', error: new Error('x'), actorId: 'stranger' });
    h.bus.send({ type: 'xstate.done.actor.stranger', output: 'x', actorId: 'stranger' });
    expect(h.bus.getSnapshot().status).toBe('active');
    expect(h.reports).toEqual([]);
  });
});

describe('toolBusMachine: bookkeeping', () => {
  it('stops each finished executor and forgets its entry', async () => {
    const h = harness();
    const a = h.call('read_file', { path: 'a.ts' });
    const b = h.call('write_file', {});
    expect(Object.keys(h.bus.getSnapshot().children).sort()).toEqual(['tool:0', 'tool:1']);
    h.running[0].resolve('a');
    h.running[1].reject(new Error('b'));
    await h.result(a);
    await h.result(b);
    expect(h.bus.getSnapshot().children).toEqual({});
    expect(h.context().executions).toEqual({});
    expect(h.context().sharedInFlight).toEqual({});
  });

  it('walks every shape of up to two executions in flight, always in ready and never in error', () => {
    const replyTo = createEmptyActor() as AnyActorRef;
    const calls: ToolBusEvent[] = [
      { type: 'TOOL.CALL', callId: 'c1', taskId: 't', name: 'read_file', args: { p: 1 }, replyTo },
      { type: 'TOOL.CALL', callId: 'c2', taskId: 't', name: 'read_file', args: { p: 2 }, replyTo },
      { type: 'TOOL.CALL', callId: 'c3', taskId: 't', name: 'write_file', args: {}, replyTo },
      { type: 'TOOL.CALL', callId: 'c4', taskId: 't', name: 'nope', args: {}, replyTo },
    ];
    type BusSnapshot = ReturnType<typeof toolBusMachine.getInitialSnapshot>;
    const shape = (s: BusSnapshot) =>
      JSON.stringify([
        s.value,
        s.status,
        Object.values(s.context.executions)
          .map((e) => `${e.name}x${e.waiters.length}`)
          .sort(),
      ]);
    const paths = getShortestPaths(toolBusMachine, {
      input: { tools: TOOLS },
      // Finish each execution in flight either way (synthetic events named by the child id).
      events: (s) => [
        ...calls,
        ...Object.keys(s.context.executions).flatMap((id) => [
          { type: `xstate.done.actor.${id}`, output: 'ok', actorId: id } as const,
          { type: `xstate.error.actor.${id}`, error: new Error('boom'), actorId: id } as const,
        ]),
      ],
      serializeState: shape,
      // Bounded: stop at two executions, or at one joined call (joining adds no execution).
      stopWhen: (s) => {
        const executions = Object.values(s.context.executions);
        return executions.length >= 2 || executions.some((e) => e.waiters.length >= 2);
      },
      limit: 1000,
    });
    const shapes = paths.map((p) => shape(p.state));
    expect(new Set(paths.map((p) => p.state.value))).toEqual(new Set(['ready']));
    expect(paths.every((p) => p.state.status === 'active')).toBe(true);
    // Nothing, one read, a read joined, a write, and the pairs of those.
    expect(shapes).toEqual(
      expect.arrayContaining([
        JSON.stringify(['ready', 'active', []]),
        JSON.stringify(['ready', 'active', ['read_filex1']]),
        JSON.stringify(['ready', 'active', ['read_filex2']]),
        JSON.stringify(['ready', 'active', ['write_filex1']]),
        JSON.stringify(['ready', 'active', ['read_filex1', 'read_filex1']]),
        JSON.stringify(['ready', 'active', ['read_filex1', 'write_filex1']]),
      ]),
    );
  });
});

describe('toolBusMachine: properties', () => {
  it('answers every call exactly once with the outcome of the one execution of its key', async () => {
    type Op = { kind: 'call'; tool: number; arg: number } | { kind: 'finish'; pick: number; fail: boolean };
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constant('call' as const), tool: fc.integer({ min: 0, max: 2 }), arg: fc.integer({ min: 0, max: 2 }) }),
      fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(), fail: fc.boolean() }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 5, maxLength: 40 }), async (ops) => {
        const h = harness();
        const names = ['read_file', 'write_file', 'unknown'];
        const expected = new Map<string, { execution: number } | 'unknown'>();
        const open: number[] = []; // indexes into h.running not yet finished
        const outcome = new Map<number, ToolBusReply['content']>();
        const failed = new Set<number>();
        const finish = async (index: number, fail: boolean) => {
          open.splice(open.indexOf(index), 1);
          const content = `out${index}`;
          outcome.set(index, content);
          if (fail) failed.add(index);
          const callers = [...expected].filter(([, e]) => e !== 'unknown' && e.execution === index).map(([id]) => id);
          if (fail) h.running[index].reject(new Error(content));
          else h.running[index].resolve(content);
          await Promise.all(callers.map((id) => h.result(id)));
        };
        for (const op of ops) {
          if (op.kind === 'call') {
            const name = names[op.tool];
            const args = { n: op.arg, opts: { a: 1, b: op.arg } };
            const before = h.running.length;
            // An identical shareable call in flight, if any, is the one this call must join.
            const joinable = open.find(
              (i) => name === 'read_file' && toolCallKey(h.running[i].input.name, h.running[i].input.args) === toolCallKey(name, args),
            );
            const id = h.call(name, args);
            if (name === 'unknown') {
              expected.set(id, 'unknown');
              expect(h.running).toHaveLength(before);
            } else if (joinable !== undefined) {
              expected.set(id, { execution: joinable });
              expect(h.running).toHaveLength(before);
            } else {
              expect(h.running).toHaveLength(before + 1);
              expected.set(id, { execution: before });
              open.push(before);
            }
          } else if (open.length > 0) {
            await finish(open[op.pick % open.length], op.fail);
          }
        }
        while (open.length > 0) await finish(open[0], false);

        for (const [id, e] of expected) {
          const replies = h.results.get(id) ?? [];
          expect(replies).toHaveLength(1);
          if (e === 'unknown') expect(replies[0].isError).toBe(true);
          else expect(replies[0]).toMatchObject({ content: outcome.get(e.execution), isError: failed.has(e.execution) });
        }
        const { stats } = h.context();
        const unknown = [...expected.values()].filter((e) => e === 'unknown').length;
        expect(stats.requested).toBe(expected.size);
        expect(stats.executed).toBe(h.running.length);
        expect(stats.requested - stats.executed - stats.deduplicated).toBe(unknown);
        expect(stats.failed).toBe(failed.size);
        expect(h.bus.getSnapshot().children).toEqual({});
        expect(h.bus.getSnapshot().status).toBe('active');
      }),
      { seed: 42, numRuns: 150 },
    );
  });
});
