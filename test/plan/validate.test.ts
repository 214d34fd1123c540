import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  formatIssue,
  parsePlan,
  PlanValidationError,
  validatePlan,
  type PlanInput,
  type PlanIssue,
  type ValidateOptions,
} from '../../src/plan/index.js';

const example = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`../../examples/plans/${name}`, import.meta.url), 'utf8'));

/**
 * A small valid plan, typed as PlanInput so it stays valid, returned loose so tests can break one
 * thing at a time.
 */
function basePlan(): any {
  const plan: PlanInput = {
    providers: { main: { type: 'anthropic', keys: [{ env: 'KEY_A' }] } },
    models: { fast: { provider: 'main', model: 'claude-haiku-4-5', price: { input: 1, output: 5 } } },
    tasks: [
      { id: 'a', model: 'fast', prompt: 'A' },
      { id: 'b', model: 'fast', prompt: 'B {{a}}', deps: ['a'] },
    ],
  };
  return structuredClone(plan);
}

const ENV = { KEY_A: 'env-secret-value-a', KEY_B: 'env-secret-value-b' };

function issuesOf(raw: unknown, opts: ValidateOptions = {}): PlanIssue[] {
  const result = validatePlan(raw, { env: ENV, ...opts });
  if (result.ok) throw new Error('expected the plan to be invalid');
  return result.issues;
}

/** `path: message` lines, the form a person reads. */
function lines(raw: unknown, opts: ValidateOptions = {}): string[] {
  return issuesOf(raw, opts).map((i) => `${i.path}: ${i.message}`);
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('valid plans', () => {
  it('accepts the example plans', () => {
    for (const name of ['hello.json', 'fallback.json']) {
      const result = validatePlan(example(name), { env: {} });
      expect(result.ok, name).toBe(true);
    }
  });

  it('applies every default when sections and fields are omitted', () => {
    const plan = parsePlan(example('hello.json'), { env: {} });
    expect(plan.defaults).toEqual({
      maxInFlight: 5,
      maxRetries: 4,
      taskTimeoutMs: 600_000,
      onFailure: 'continue',
      maxTurns: 8,
    });
    expect(plan.tasks[0]).toMatchObject({ id: 'outline', deps: [], priority: 0, tools: [] });
    expect(plan.models.fast.fallback).toEqual([]);
    expect(plan.providers.sim.keys).toEqual([]);
    const noMaxTokens = basePlan();
    expect(parsePlan(noMaxTokens, { env: ENV }).models.fast.maxTokens).toBe(1024);
  });

  it('keeps the defaults that are given and fills in the rest', () => {
    const raw = { ...basePlan(), defaults: { maxInFlight: 2, onFailure: 'fail-fast' } };
    expect(parsePlan(raw, { env: ENV }).defaults).toEqual({
      maxInFlight: 2,
      maxRetries: 4,
      taskTimeoutMs: 600_000,
      onFailure: 'fail-fast',
      maxTurns: 8,
    });
  });

  it('accepts zero retries, negative priorities and every id character allowed', () => {
    const raw = basePlan();
    raw.defaults = { maxRetries: 0 };
    raw.tasks.push({ id: 'ns:x/y_z.1-2', model: 'fast', prompt: 'p', priority: -3, maxRetries: 0 });
    expect(validatePlan(raw, { env: ENV }).ok).toBe(true);
  });

  it('looks env keys up in process.env by default', () => {
    vi.stubEnv('KEY_A', 'from-process-env');
    expect(validatePlan(basePlan()).ok).toBe(true);
    vi.stubEnv('KEY_A', '');
    expect(validatePlan(basePlan()).ok).toBe(false);
  });

  it('lets a sim provider omit keys, but not an anthropic or openai one', () => {
    const raw = basePlan();
    raw.providers = { main: { type: 'sim' }, oa: { type: 'openai' }, an: { type: 'anthropic', keys: [] } };
    expect(lines(raw)).toEqual([
      'providers.oa.keys: an "openai" provider needs at least one key ({"env": "VAR_NAME"})',
      'providers.an.keys: an "anthropic" provider needs at least one key ({"env": "VAR_NAME"})',
    ]);
  });
});

describe('structure', () => {
  it('names an unknown field at every level, with a suggestion for a typo', () => {
    const raw = basePlan();
    raw.tasks[0].promt = 'x';
    raw.models.fast.maxTokns = 3;
    raw.providers.main.limits = { rpm: 1, tpm: 2 };
    raw.defaults = { maxRetires: 2 };
    raw.extra = true;
    expect(lines(raw)).toEqual(
      expect.arrayContaining([
        'tasks[0].promt: unknown field (did you mean "prompt"?)',
        'models.fast.maxTokns: unknown field (did you mean "maxTokens"?)',
        'providers.main.limits.tpm: unknown field (did you mean "rpm"?)',
        'defaults.maxRetires: unknown field (did you mean "maxRetries"?)',
        'extra: unknown field',
      ]),
    );
  });

  it('checks numbers: positive integer counts, non-negative prices, a positive budget', () => {
    const raw = basePlan();
    raw.providers.main.limits = { rpm: 0, concurrency: 1.5 };
    raw.models.fast.price = { input: -1, output: 5 };
    raw.budget = { usd: 0 };
    raw.defaults = { maxInFlight: 0, taskTimeoutMs: -5 };
    raw.tasks[0].priority = 0.5;
    raw.tasks[0].maxTokens = 0;
    expect(lines(raw)).toEqual(
      expect.arrayContaining([
        'providers.main.limits.rpm: must be a positive integer',
        'providers.main.limits.concurrency: must be an integer',
        'models.fast.price.input: must be a non-negative number (USD per million tokens)',
        'budget.usd: must be greater than 0',
        'defaults.maxInFlight: must be a positive integer',
        'defaults.taskTimeoutMs: must be a positive integer',
        'tasks[0].priority: must be an integer',
        'tasks[0].maxTokens: must be a positive integer',
      ]),
    );
  });

  it('checks task ids: characters and length', () => {
    const raw = basePlan();
    raw.tasks.push({ id: 'has space', model: 'fast', prompt: 'p' });
    raw.tasks.push({ id: 'x'.repeat(201), model: 'fast', prompt: 'p' });
    raw.tasks.push({ id: '', model: 'fast', prompt: 'p' });
    raw.tasks.push({ id: 'x'.repeat(200), model: 'fast', prompt: 'p' });
    expect(lines(raw)).toEqual([
      'tasks[2].id: a task id may use only letters, digits and _ . : / -',
      'tasks[3].id: a task id must be at most 200 characters',
      'tasks[4].id: a task id must not be empty',
    ]);
  });

  it('reports a plan with tasks but no models section', () => {
    const raw = basePlan();
    delete raw.models;
    expect(lines(raw)).toEqual(['models: required: every task names a model defined in this section']);
  });

  it('needs neither models nor providers for a plan that calls no model, and providers once a model is defined', () => {
    const fnOnly = { tasks: [{ id: 'a', kind: 'fn', fn: 'one' }, { id: 'ok', kind: 'approval', approves: 'a', prompt: 'Fine?' }] };
    const r = validatePlan(fnOnly);
    expect(r.ok, JSON.stringify(!r.ok && r.issues)).toBe(true);
    if (r.ok) expect([r.plan.providers, r.plan.models]).toEqual([{}, {}]);
    // A task naming a model without either section: both are named, as before.
    expect(lines({ tasks: [{ id: 'a', model: 'm', prompt: 'x' }] })).toEqual([
      'models: required: every task names a model defined in this section',
      'providers: required: every model names a provider defined in this section',
    ]);
    // Models defined, no providers.
    expect(lines({ models: { m: { provider: 'p', model: 'x' } }, tasks: [{ id: 'a', kind: 'fn', fn: 'one' }] })).toEqual([
      'providers: required: every model names a provider defined in this section',
    ]);
    // A map without fn still needs its model (the kind's own check), with no section asked for.
    expect(lines({ tasks: [{ id: 'm', kind: 'map', items: { values: [1] }, prompt: 'x {{item}}' }] })).toEqual([
      'tasks[0].model: required (or "fn": a function to run on each item)',
    ]);
  });

  it('reports missing required fields and wrong types by kind, not value', () => {
    expect(lines({ providers: {}, models: {}, tasks: [{ id: 'a' }, 'b'] })).toEqual([
      'tasks[0].model: required',
      'tasks[0].prompt: required',
      'tasks[1]: expected an object, got a string',
    ]);
    expect(issuesOf('plan')).toEqual([{ path: '', message: 'expected an object, got a string' }]);
    expect(formatIssue({ path: '', message: 'm' })).toBe('plan: m');
    expect(lines({ providers: {}, models: {}, tasks: [] })).toEqual(['tasks: a plan needs at least one task']);
  });

  it('quotes names that are not identifiers in paths', () => {
    const raw = basePlan();
    raw.models['gpt-4.1'] = { provider: 'nope', model: 'gpt-4.1' };
    expect(lines(raw)).toEqual(['models["gpt-4.1"].provider: unknown provider "nope"']);
  });

  it('rejects provider and model names that cannot be actor ids', () => {
    const raw = basePlan();
    raw.providers['a/b'] = { type: 'sim' };
    expect(lines(raw)).toEqual(['providers["a/b"]: provider name may use only letters, digits, "_", "." and "-"']);
  });
});

describe('names that are also Object.prototype\'s', () => {
  // JSON.parse makes `__proto__` an own key, as a plan file does.
  const hostile = () =>
    JSON.parse(`{
      "providers": { "__proto__": { "type": "sim" }, "constructor": { "type": "sim" } },
      "models": {
        "__proto__": { "provider": "__proto__", "model": "claude-haiku-4-5", "fallback": ["constructor"] },
        "constructor": { "provider": "constructor", "model": "claude-haiku-4-5" }
      },
      "budget": { "perModel": { "__proto__": 1 } },
      "tasks": [{ "id": "__proto__", "model": "__proto__", "prompt": "x", "budgetUsd": 1 }]
    }`);

  it('keeps __proto__ and constructor as providers and models, in tables with nothing inherited', () => {
    const plan = parsePlan(hostile(), { env: {} });
    expect(Object.keys(plan.providers)).toEqual(['__proto__', 'constructor']);
    expect(Object.keys(plan.models)).toEqual(['__proto__', 'constructor']);
    expect(plan.models['__proto__']).toMatchObject({ provider: '__proto__', model: 'claude-haiku-4-5', fallback: ['constructor'] });
    expect(Object.keys(plan.budget!.perModel!)).toEqual(['__proto__']);
    expect(plan.models['toString']).toBeUndefined();
    expect(plan.providers['hasOwnProperty']).toBeUndefined();
  });

  it('checks what is under a __proto__ name like any other', () => {
    const plan = hostile();
    plan.models['__proto__'].maxTokens = 0;
    expect(lines(plan)).toEqual(['models.__proto__.maxTokens: must be a positive integer']);
  });
});

describe('references', () => {
  it('reports duplicate ids, unknown deps, self deps and repeated deps at their paths', () => {
    const raw = basePlan();
    raw.tasks.push({ id: 'c', model: 'fast', prompt: 'p', deps: ['zz', 'c', 'a', 'a'] });
    raw.tasks.push({ id: 'a', model: 'fast', prompt: 'p' });
    expect(lines(raw)).toEqual([
      'tasks[3].id: duplicate task id "a" (first used by tasks[0])',
      'tasks[2].deps[0]: unknown task "zz"',
      'tasks[2].deps[1]: task "c" depends on itself',
      'tasks[2].deps[3]: "a" is listed twice',
    ]);
  });

  it('names a cycle from its first task, at the dep that starts it', () => {
    const raw = basePlan();
    raw.tasks = [
      { id: 'x', model: 'fast', prompt: 'p' },
      { id: 'a', model: 'fast', prompt: 'p', deps: ['x', 'b'] },
      { id: 'b', model: 'fast', prompt: 'p', deps: ['c'] },
      { id: 'c', model: 'fast', prompt: 'p', deps: ['a'] },
    ];
    expect(lines(raw)).toEqual(['tasks[1].deps[1]: cycle: a -> b -> c -> a']);
  });

  it('names each separate cycle once, and a tangle of cycles once', () => {
    const raw = basePlan();
    raw.tasks = [
      { id: 'a', model: 'fast', prompt: 'p', deps: ['b'] },
      { id: 'b', model: 'fast', prompt: 'p', deps: ['a'] },
      // A tangle: p -> q -> p and p -> r -> s -> p share p.
      { id: 'p', model: 'fast', prompt: 'p', deps: ['r', 'q'] },
      { id: 'q', model: 'fast', prompt: 'p', deps: ['p'] },
      { id: 'r', model: 'fast', prompt: 'p', deps: ['s'] },
      { id: 's', model: 'fast', prompt: 'p', deps: ['p'] },
    ];
    expect(lines(raw)).toEqual([
      'tasks[0].deps[0]: cycle: a -> b -> a',
      'tasks[2].deps[1]: cycle: p -> q -> p (and 2 more tasks on cycles through these)',
    ]);
  });

  it('reports unknown models, providers and fallbacks, and fallback loops', () => {
    const raw = basePlan();
    raw.models.fast.fallback = ['smart', 'nope'];
    raw.models.smart = { provider: 'mian', model: 'm', price: { input: 1, output: 1 }, fallback: ['fast'] };
    raw.models.solo = { provider: 'main', model: 'm', fallback: ['solo'] };
    raw.tasks[0].model = 'fsat';
    expect(lines(raw)).toEqual([
      'models.fast.fallback[1]: unknown model "nope"',
      'models.smart.provider: unknown provider "mian" (did you mean "main"?)',
      'models.fast.fallback: fallback loop fast -> smart -> fast',
      'models.solo.fallback: fallback loop solo -> solo',
      'tasks[0].model: unknown model "fsat" (did you mean "fast"?)',
    ]);
  });

  it('reports a missing or empty environment variable by name', () => {
    const raw = basePlan();
    raw.providers.main.keys = [{ env: 'KEY_A' }, { env: 'KEY_B' }, { env: 'KEY_C' }];
    expect(lines(raw, { env: { KEY_A: 'x', KEY_C: '' } })).toEqual([
      'providers.main.keys[1].env: environment variable KEY_B is not set',
      'providers.main.keys[2].env: environment variable KEY_C is empty',
    ]);
  });

  it('reports a key variable holding a line ending or a space by name, never by value', () => {
    const raw = basePlan();
    raw.providers.main.keys = [{ env: 'KEY_A' }, { env: 'KEY_B' }, { env: 'KEY_C' }];
    const env = { KEY_A: 'sk-ant-secret-1\r', KEY_B: 'sk-ant-secret-2', KEY_C: ' sk-ant-secret-3\n' };
    const found = lines(raw, { env });
    expect(found).toEqual([
      'providers.main.keys[0].env: environment variable KEY_A holds whitespace or a control character (a line ending copied with the key?): an API key has none, remove it',
      'providers.main.keys[2].env: environment variable KEY_C holds whitespace or a control character (a line ending copied with the key?): an API key has none, remove it',
    ]);
    expect(found.join('\n')).not.toContain('sk-ant-secret');
  });

  it('reports a key listed twice', () => {
    const raw = basePlan();
    raw.providers.main.keys = [{ env: 'KEY_A' }, 'sk-inline-1', { env: 'KEY_A' }, 'sk-inline-1'];
    expect(lines(raw)).toEqual([
      'providers.main.keys[2]: the same key as keys[0]',
      'providers.main.keys[3]: the same key as keys[1]',
    ]);
  });

  it('checks tools against the known names only when they are given', () => {
    const raw = basePlan();
    raw.tasks[0].tools = ['read_file', 'raed_file', 'read_file'];
    expect(lines(raw)).toEqual(['tasks[0].tools[2]: "read_file" is listed twice']);
    expect(lines(raw, { tools: new Set(['read_file']) })).toEqual([
      'tasks[0].tools[1]: unknown tool "raed_file" (did you mean "read_file"?)',
      'tasks[0].tools[2]: "read_file" is listed twice',
    ]);
  });

  it('requires a price when there is a budget, unless the model is in the built-in price table', () => {
    const raw = basePlan();
    delete raw.models.fast.price;
    raw.models.fast.model = 'my-private-model';
    expect(validatePlan(raw, { env: ENV }).ok).toBe(true);
    raw.budget = { usd: 2 };
    expect(lines(raw)).toEqual(['models.fast.price: required when the plan has a budget: "my-private-model" is not in the built-in price table (USD per million tokens)']);
    raw.models.fast.model = 'claude-haiku-4-5';
    expect(validatePlan(raw, { env: ENV }).ok).toBe(true);
  });

  it('requires room for input: maxTokens below contextTokens', () => {
    const raw = basePlan();
    raw.models.fast.contextTokens = 1000;
    expect(lines(raw)).toEqual(['models.fast.maxTokens: must be less than contextTokens (1000)']);
  });

  it('reports a placeholder naming a task that is not a dep, and leaves other names alone', () => {
    const raw = basePlan();
    raw.tasks.push({ id: 'c', model: 'fast', system: 'Use {{a}}.', prompt: '{{b}} {{b}} {{c}} {{user}} {{ a }}' });
    expect(lines(raw)).toEqual([
      'tasks[2].system: {{a}} names task "a", which is not in deps: add it to deps so its output is ready',
      'tasks[2].prompt: {{b}} names task "b", which is not in deps: add it to deps so its output is ready',
      "tasks[2].prompt: {{c}} is this task's own output",
      'tasks[2].prompt: {{a}} names task "a", which is not in deps: add it to deps so its output is ready',
    ]);
  });
});

describe('every problem at once', () => {
  it('reports structural and reference problems together, in one pass', () => {
    const raw = basePlan();
    raw.providers.main.limits = { rpm: -1 };
    raw.providers.main.keys = [{ env: 'KEY_B' }, { env: 'KEY_MISSING' }];
    raw.models.fast.provider = 'other';
    raw.defaults = { onFailure: 'stop' };
    raw.tasks[0].deps = ['b'];
    raw.tasks[1].deps = ['a', 'ghost'];
    raw.tasks.push({ id: 'bad id', model: 'slow', prompt: '', deps: 7 });
    raw.tasks.push({ id: 'a', model: 'fast', prompt: 'p', tools: ['t'] });
    const paths = issuesOf(raw, { tools: [] }).map((i) => i.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'providers.main.limits.rpm',
        'providers.main.keys[1].env',
        'models.fast.provider',
        'defaults.onFailure',
        'tasks[1].deps[1]',
        'tasks[2].id',
        'tasks[2].prompt',
        'tasks[2].deps',
        'tasks[2].model',
        'tasks[3].id',
        'tasks[3].tools[0]',
        'tasks[0].deps[0]',
      ]),
    );
    expect(paths).toHaveLength(12);
  });

  it('throws PlanValidationError listing every issue on its own line', () => {
    const raw = basePlan();
    raw.tasks[1].deps = ['zz'];
    raw.tasks[1].prompt = 'B';
    raw.tasks[0].model = 'nope';
    let error: unknown;
    try {
      parsePlan(raw, { env: ENV });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PlanValidationError);
    const e = error as PlanValidationError;
    expect(e.code).toBe('PLAN_INVALID');
    expect(e.issues).toHaveLength(2);
    const messageLines = e.message.split('\n');
    expect(messageLines).toContain('tasks[1].deps[0]: unknown task "zz"');
    expect(messageLines).toContain('tasks[0].model: unknown model "nope"');
  });
});

describe('secrets', () => {
  const secret = 'sk-ant-SUPER-SECRET-0123456789';

  function assertNoSecret(raw: unknown, needles: string[], opts: ValidateOptions = {}) {
    const issues = issuesOf(raw, opts);
    let message = '';
    try {
      parsePlan(raw, { env: ENV, ...opts });
    } catch (e) {
      message = (e as Error).message;
    }
    const text = JSON.stringify(issues) + message;
    for (const needle of needles) expect(text).not.toContain(needle);
    return issues;
  }

  it('describes an invalid inline key by its position, never its value', () => {
    const raw = basePlan();
    raw.providers.main.keys = [`${secret} `, `${secret}\n`, ''];
    const issues = assertNoSecret(raw, [secret, 'SUPER-SECRET']);
    expect(issues.map((i) => i.path)).toEqual([
      'providers.main.keys[0]',
      'providers.main.keys[1]',
      'providers.main.keys[2]',
    ]);
  });

  it('does not echo a key object with a secret in an unknown field or in place of the env name', () => {
    const raw = basePlan();
    raw.providers.main.keys = [{ env: 'KEY_A', value: secret }, { [secret]: true }, { env: secret }, { env: 'sk_live_abc123XYZ' }];
    const issues = assertNoSecret(raw, [secret, 'sk_live_abc123XYZ']);
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'providers.main.keys[0]: a key object has only the field "env"',
      'providers.main.keys[1].env: required',
      'providers.main.keys[1]: a key object has only the field "env"',
      'providers.main.keys[2].env: must be an environment variable name (letters, digits, "_")',
      'providers.main.keys[3].env: the environment variable named here (a key pasted in place of a variable name?) is not set',
    ]);
  });

  it('never includes environment values or duplicate inline keys', () => {
    const raw = basePlan();
    raw.providers.main.keys = [secret, secret, { env: 'KEY_A' }, { env: 'KEY_NOPE' }];
    raw.tasks[0].model = 'nope';
    assertNoSecret(raw, [secret, ENV.KEY_A, ENV.KEY_B]);
  });

  it('does not echo wrong-typed input values', () => {
    const raw = basePlan();
    raw.providers.main.baseURL = `ftp://user:${secret}@example.com`;
    raw.providers.main.keys = [42424242];
    raw.budget = { usd: 'sk-budget-9999' };
    assertNoSecret(raw, [secret, '42424242', 'sk-budget-9999']);
  });
});

describe('scale', () => {
  /** 10,000 tasks in 100 layers of 100; each task depends on 3 tasks of the layer before. */
  function layeredPlan(layers: number, width: number): Record<string, any> {
    const tasks = [];
    for (let l = 0; l < layers; l++) {
      for (let w = 0; w < width; w++) {
        const deps = l === 0 ? [] : [0, 1, 2].map((k) => `t${l - 1}_${(w + k * 7) % width}`);
        tasks.push({ id: `t${l}_${w}`, model: 'fast', prompt: `task ${l}/${w}`, deps });
      }
    }
    return { providers: { sim: { type: 'sim' } }, models: { fast: { provider: 'sim', model: 'm' } }, tasks };
  }

  it('validates a 10,000-task layered plan', () => {
    const result = validatePlan(layeredPlan(100, 100), { env: {} });
    expect(result.ok).toBe(true);
    if (result.ok) {
      expect(result.plan.tasks).toHaveLength(10_000);
      expect(result.plan.tasks[9_999].deps).toHaveLength(3);
    }
  });

  it('finds the one cycle and the one unknown dep in a 10,000-task plan', () => {
    const raw = layeredPlan(100, 100);
    raw.tasks[0].deps = ['t99_5'];
    raw.tasks[5000].deps.push('missing');
    expect(lines(raw)).toEqual([
      'tasks[5000].deps[3]: unknown task "missing"',
      expect.stringMatching(/^tasks\[0\]\.deps\[0\]: cycle: t0_0 -> t99_5 -> .* -> t0_0/),
    ]);
  });

  it('validates a 10,000-deep chain and names a 10,000-task cycle without deep recursion', () => {
    const tasks = Array.from({ length: 10_000 }, (_, i) => ({
      id: `c${i}`,
      model: 'fast',
      prompt: 'p',
      deps: i === 0 ? [] : [`c${i - 1}`],
    }));
    const raw = { providers: { sim: { type: 'sim' } }, models: { fast: { provider: 'sim', model: 'm' } }, tasks };
    expect(validatePlan(raw, { env: {} }).ok).toBe(true);
    tasks[0].deps = ['c9999'];
    const [only, ...rest] = lines(raw);
    expect(rest).toEqual([]);
    expect(only.startsWith('tasks[0].deps[0]: cycle: c0 -> c9999 -> c9998')).toBe(true);
    expect(only.endsWith('c1 -> c0')).toBe(true);
  });
});

describe('durations and limits', () => {
  it('refuses a delay a timer cannot hold (2^31 ms or more fires after 1 ms in Node), naming each path', () => {
    const plan = basePlan();
    plan.defaults = { taskTimeoutMs: 3_000_000_000 };
    plan.tasks[0].timeoutMs = 2 ** 31;
    plan.tools = { callTimeoutMs: 3_000_000_000 };
    plan.providers.main.headersTimeoutMs = 2 ** 40;
    const found = lines(plan);
    for (const path of ['defaults.taskTimeoutMs', 'tasks[0].timeoutMs', 'tools.callTimeoutMs', 'providers.main.headersTimeoutMs']) {
      expect(found).toContainEqual(`${path}: must be at most 2147483647 ms (about 24.8 days)`);
    }
    plan.defaults = { taskTimeoutMs: 2 ** 31 - 1 };
    plan.tasks[0].timeoutMs = 1_000;
    plan.tools = { callTimeoutMs: 60_000 };
    plan.providers.main.headersTimeoutMs = 10_000;
    expect(validatePlan(plan, { env: ENV }).ok).toBe(true);
  });

  it('takes a burst per limit and maxRateLimitWaits, and refuses a burst of 0', () => {
    const plan = basePlan();
    plan.providers.main.limits = { rpm: 60, burst: { rpm: 5, otpm: 4000 } };
    plan.defaults = { maxRateLimitWaits: 20 };
    expect(validatePlan(plan, { env: ENV }).ok).toBe(true);
    plan.providers.main.limits.burst.itpm = 0;
    expect(lines(plan)).toContainEqual('providers.main.limits.burst.itpm: must be greater than 0');
  });
});

describe('custom and ai-sdk providers', () => {
  it('take no keys, and refuse the settings that belong to the object given in code', () => {
    const ok = basePlan();
    ok.providers.main = { type: 'custom' };
    expect(validatePlan(ok, { env: ENV }).ok).toBe(true);
    ok.providers.main = { type: 'ai-sdk', keys: [{ env: 'KEY_A' }], limits: { rpm: 60 } };
    expect(validatePlan(ok, { env: ENV }).ok).toBe(true);
    const bad = basePlan();
    bad.providers.main = { type: 'ai-sdk', baseURL: 'http://localhost:11434/v1', headersTimeoutMs: 1000 };
    expect(lines(bad)).toEqual([
      'providers.main.baseURL: a "ai-sdk" provider is an object given in code: set its endpoint there, not in the plan',
      'providers.main.headersTimeoutMs: a "ai-sdk" provider is an object given in code: set its timeouts there, not in the plan',
    ]);
  });
});
