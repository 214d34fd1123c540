/**
 * createSwarm({ functions }): a plan whose `fn` names a function the swarm was not given is
 * refused by run() before anything starts (PlanValidationError, the path and the names given),
 * and a `functions` entry that is not a function is refused by createSwarm itself.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createSwarm, PlanValidationError, type Swarm } from '../../src/index.js';

const plan = {
  providers: { sim: { type: 'sim' } },
  models: { m: { provider: 'sim', model: 'sim-fast' } },
  tasks: [
    { id: 'fetch', kind: 'fn', fn: 'fetchOrders' },
    { id: 'each', kind: 'map', items: { from: 'fetch' }, fn: 'enrich' },
  ],
};

let swarm: Swarm | undefined;
afterEach(async () => {
  await swarm?.close();
  swarm = undefined;
});

const refusal = (s: Swarm) => {
  try {
    s.run(plan);
  } catch (error) {
    return error;
  }
  throw new Error('run() started a plan naming functions it was not given');
};

describe('createSwarm and plan functions', () => {
  it('refuses a plan naming functions when it was given none', () => {
    swarm = createSwarm({ store: false });
    const error = refusal(swarm);
    expect(error).toBeInstanceOf(PlanValidationError);
    expect((error as PlanValidationError).issues).toEqual([
      { path: 'tasks[0].fn', message: 'no function "fetchOrders": no functions were given (createSwarm({ functions }) in code, --functions <file> on the command line)' },
      { path: 'tasks[1].fn', message: 'no function "enrich": no functions were given (createSwarm({ functions }) in code, --functions <file> on the command line)' },
    ]);
  });

  it('refuses a plan naming a function it was not given, listing those it was', () => {
    swarm = createSwarm({ store: false, functions: { fetchOrders: () => [], enrichOne: () => ({}) } });
    expect((refusal(swarm) as PlanValidationError).issues).toEqual([
      { path: 'tasks[1].fn', message: 'no function "enrich": the functions given are fetchOrders, enrichOne' },
    ]);
  });

  it('refuses functions that are not functions, naming the entry', () => {
    expect(() => createSwarm({ store: false, functions: { fetchOrders: 'fetch' as never } })).toThrowError(
      new TypeError('createSwarm({ functions }): functions.fetchOrders is a string, not a function'),
    );
    expect(() => createSwarm({ store: false, functions: [] as never })).toThrowError(
      new TypeError('createSwarm({ functions }): functions is an array: give an object of functions by name ({ fetchOrders: async (ctx) => ... })'),
    );
  });

  it('runs a plan of code steps alone: no providers, no models', async () => {
    swarm = createSwarm({ store: false, functions: { one: () => ({ n: 1 }), two: (ctx) => ({ n: (ctx.deps.a as { n: number }).n + 1 }) } });
    const result = await swarm.run({ tasks: [{ id: 'a', kind: 'fn', fn: 'one' }, { id: 'b', kind: 'fn', fn: 'two', deps: ['a'] }] }).result;
    expect(result.status).toBe('completed');
    expect(result.tasks.b!.output).toEqual({ n: 2 });
  });
});
