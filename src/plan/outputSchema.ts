/**
 * Output schemas: what is checked of one before ajv sees it, and its compiler.
 *
 * - Each schema gets an ajv of its own. ajv registers a compiled schema's `$id`s, so one shared
 *   instance refused every later copy of a schema with `$id` (each answer checks a copy that came
 *   through the run's actors) and any other schema with the same `$id`.
 * - ajv walks a schema by recursion: past some depth its meta-schema check overflows the stack,
 *   and `$ref`s that lead back to where they started without reaching a value (`{"$ref": "#"}`)
 *   recurse for ever, in the compiler or in every check. Both are found here first, by loops over
 *   an explicit stack, and reported with their paths.
 * - Patterns run as userPattern.ts says (linear time, or a time bound); one that does not compile
 *   is named here.
 */
import type { ValidateFunction } from 'ajv';
import { instanceFor, newInstanceFor, withoutUnknownMeta } from '../tools/ajv.js';
import { isRecord } from './issues.js';
import { ajvRegExp, userPattern } from './userPattern.js';

/** Levels of JSON nesting a schema may have: 32 levels of `{"properties": {"a": ...}}`. */
export const MAX_SCHEMA_DEPTH = 64;

export type SchemaPath = (string | number)[];
export interface SchemaProblem {
  /** Inside the schema: `['properties', 'code', 'pattern']`. */
  path: SchemaPath;
  message: string;
}

type Compiled = ValidateFunction | { error: string };
const byObject = new WeakMap<object, Compiled>();
/** By the schema's JSON text: the copies of one schema share one compiler. */
const byText = new Map<string, Compiled>();
const KEPT = 256;

/**
 * A compiled output schema (one ajv of its own per distinct schema, its patterns on the
 * linear-time engine), or why it does not compile.
 */
export function compileOutputSchema(schema: unknown): Compiled {
  if (!isRecord(schema)) return { error: 'an output schema must be a JSON Schema object' };
  const seen = byObject.get(schema);
  if (seen) return seen;
  let text: string;
  try {
    text = JSON.stringify(schema);
  } catch (error) {
    return { error: `the schema cannot be read as JSON: ${(error as Error).message}` };
  }
  let compiled = byText.get(text);
  if (!compiled) {
    compiled = compileAlone(schema);
    if (byText.size >= KEPT) byText.delete(byText.keys().next().value!);
    byText.set(text, compiled);
  }
  byObject.set(schema, compiled);
  return compiled;
}

function compileAlone(schema: Record<string, unknown>): Compiled {
  const [problem] = schemaShapeProblems(schema);
  if (problem) return { error: `${problem.path.length > 0 ? `at ${pointerOf(problem.path)}: ` : ''}${problem.message}` };
  const cleaned = withoutUnknownMeta(schema);
  try {
    // The meta-schema check on the shared instance (its meta-schema compiled once), then the
    // schema alone on its own instance.
    const shared = instanceFor(schema);
    if (!shared.validateSchema(cleaned)) return { error: `not a valid JSON Schema: ${shared.errorsText(shared.errors)}` };
    return newInstanceFor(schema, { validateSchema: false, code: { regExp: ajvRegExp } }).compile(cleaned);
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * What ajv must not be handed: nesting past MAX_SCHEMA_DEPTH, `$ref`s that loop without reaching
 * a value, patterns the engine cannot run. Each problem with its path inside the schema.
 */
export function schemaShapeProblems(schema: unknown): SchemaProblem[] {
  const tooDeep = depthProblem(schema);
  if (tooDeep) return [tooDeep];
  const graph = schemaGraph(schema);
  const problems: SchemaProblem[] = [];
  for (const node of graph.nodes.values()) {
    const s = node.schema;
    if (typeof s.pattern === 'string') {
      const p = userPattern(s.pattern);
      if (!p.ok) problems.push({ path: [...node.path, 'pattern'], message: p.message });
    }
    if (isRecord(s.patternProperties)) {
      for (const key of Object.keys(s.patternProperties)) {
        const p = userPattern(key);
        if (!p.ok) problems.push({ path: [...node.path, 'patternProperties', key], message: p.message });
      }
    }
  }
  const cycle = refCycle(graph);
  if (cycle) problems.push(cycle);
  return problems.slice(0, 8);
}

/** The first object or array nested deeper than MAX_SCHEMA_DEPTH, with its path. */
function depthProblem(schema: unknown): SchemaProblem | undefined {
  const stack: { value: unknown; path: SchemaPath }[] = [{ value: schema, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    if (path.length > MAX_SCHEMA_DEPTH) {
      return { path, message: `nested more than ${MAX_SCHEMA_DEPTH} levels deep: flatten the schema (a deeper one could overflow the stack of every check)` };
    }
    if (Array.isArray(value)) value.forEach((v, i) => stack.push({ value: v, path: [...path, i] }));
    else for (const [k, v] of Object.entries(value)) stack.push({ value: v, path: [...path, k] });
  }
  return undefined;
}

interface SchemaNode {
  schema: Record<string, unknown>;
  path: SchemaPath;
  /** The resource it belongs to: the nearest schema with an `$id` at or above it (the root otherwise). */
  resource: Record<string, unknown>;
  /** That resource's `$id`, made absolute against the resources around it. */
  base: string | undefined;
}

interface SchemaGraph {
  nodes: Map<object, SchemaNode>;
  /** Resources by their absolute `$id`. */
  resources: Map<string, Record<string, unknown>>;
}

/** Keywords whose value is one schema, a list of schemas, or a table of them. */
const ONE = ['additionalProperties', 'additionalItems', 'contains', 'propertyNames', 'not', 'if', 'then', 'else', 'unevaluatedItems', 'unevaluatedProperties', 'contentSchema', 'items'];
const LIST = ['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items'];
const TABLE = ['properties', 'patternProperties', 'definitions', '$defs', 'dependentSchemas', 'dependencies'];
/** Keywords that apply their schemas to the same value (no step into it): a loop through them never ends. */
const IN_PLACE_ONE = ['not', 'if', 'then', 'else'];
const IN_PLACE_LIST = ['allOf', 'anyOf', 'oneOf'];
const IN_PLACE_TABLE = ['dependentSchemas', 'dependencies'];

/** Every schema in schema position (not inside `enum`, `const`, `default`...), by object. */
function schemaGraph(root: unknown): SchemaGraph {
  const graph: SchemaGraph = { nodes: new Map(), resources: new Map() };
  if (!isRecord(root)) return graph;
  const stack: { schema: Record<string, unknown>; path: SchemaPath; above?: SchemaNode }[] = [{ schema: root, path: [] }];
  while (stack.length > 0) {
    const { schema: s, path, above } = stack.pop()!;
    if (graph.nodes.has(s)) continue;
    const id = typeof s.$id === 'string' && !s.$id.startsWith('#') ? s.$id : undefined;
    const node: SchemaNode = id !== undefined || !above
      ? { schema: s, path, resource: s, base: id === undefined ? undefined : absolute(id, above?.base) }
      : { schema: s, path, resource: above.resource, base: above.base };
    graph.nodes.set(s, node);
    if (node.resource === s && node.base !== undefined) graph.resources.set(node.base, s);
    const children: { schema: Record<string, unknown>; path: SchemaPath; above: SchemaNode }[] = [];
    const add = (value: unknown, at: SchemaPath) => {
      if (isRecord(value)) children.push({ schema: value, path: at, above: node });
    };
    for (const k of Object.keys(s)) {
      const v = s[k];
      if (ONE.includes(k)) add(v, [...path, k]);
      if (LIST.includes(k) && Array.isArray(v)) v.forEach((x, i) => add(x, [...path, k, i]));
      if (TABLE.includes(k) && isRecord(v)) for (const [name, x] of Object.entries(v)) add(x, [...path, k, name]);
    }
    // Reversed onto the stack: the walk meets sub-schemas in the order the schema writes them.
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return graph;
}

/** The schemas a schema applies to its own value: its `$ref`'s target and its in-place applicators. */
function inPlace(node: SchemaNode, graph: SchemaGraph): { to: SchemaNode; via: SchemaPath }[] {
  const s = node.schema;
  const out: { to: SchemaNode; via: SchemaPath }[] = [];
  const add = (value: unknown, via: SchemaPath) => {
    const to = isRecord(value) ? graph.nodes.get(value) : undefined;
    if (to) out.push({ to, via });
  };
  if (typeof s.$ref === 'string') add(resolveRef(s.$ref, node, graph), [...node.path, '$ref']);
  for (const k of IN_PLACE_ONE) add(s[k], [...node.path, k]);
  for (const k of IN_PLACE_LIST) if (Array.isArray(s[k])) (s[k] as unknown[]).forEach((v, i) => add(v, [...node.path, k, i]));
  for (const k of IN_PLACE_TABLE) if (isRecord(s[k])) for (const [name, v] of Object.entries(s[k])) add(v, [...node.path, k, name]);
  return out;
}

/**
 * The schema a `$ref` names inside this schema: `#`, `#/json/pointer` or `#anchor` in the
 * ref's resource, or `<$id>#...` of a resource of this schema. Undefined when it names anything
 * else (ajv then says it cannot resolve it).
 */
function resolveRef(ref: string, from: SchemaNode, graph: SchemaGraph): unknown {
  const hash = ref.indexOf('#');
  const id = hash < 0 ? ref : ref.slice(0, hash);
  const fragment = hash < 0 ? '' : ref.slice(hash + 1);
  const resource = id === '' ? from.resource : graph.resources.get(absolute(id, from.base));
  if (!resource || fragment === '') return resource;
  if (!fragment.startsWith('/')) {
    // An anchor: `$anchor` (2019-09 on), or an `$id` of `#name` (draft-07).
    for (const n of graph.nodes.values()) {
      if (n.resource === resource && (n.schema.$anchor === fragment || n.schema.$id === `#${fragment}`)) return n.schema;
    }
    return undefined;
  }
  let value: unknown = resource;
  for (const raw of fragment.slice(1).split('/')) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined;
    }
    if (Array.isArray(value) && /^\d+$/.test(key)) value = value[Number(key)];
    else if (isRecord(value) && Object.hasOwn(value, key)) value = value[key];
    else return undefined;
  }
  return value;
}

/** An `$id` made absolute against its base, without an empty fragment (`urn:x#` is `urn:x`). */
function absolute(id: string, base: string | undefined): string {
  try {
    return new URL(id, base).href.replace(/#$/, '');
  } catch {
    return id.replace(/#$/, '');
  }
}

/** A loop of in-place steps (a `$ref` among them) from a schema back to itself, if any: the first found. */
function refCycle(graph: SchemaGraph): SchemaProblem | undefined {
  const state = new Map<SchemaNode, 'open' | 'done'>();
  for (const start of graph.nodes.values()) {
    if (state.has(start)) continue;
    // An explicit stack of (node, its edges, the next edge to follow): no recursion.
    const stack: { node: SchemaNode; edges: { to: SchemaNode; via: SchemaPath }[]; next: number }[] = [];
    const open = (node: SchemaNode) => {
      state.set(node, 'open');
      stack.push({ node, edges: inPlace(node, graph), next: 0 });
    };
    open(start);
    while (stack.length > 0) {
      const top = stack.at(-1)!;
      if (top.next >= top.edges.length) {
        state.set(top.node, 'done');
        stack.pop();
        continue;
      }
      const edge = top.edges[top.next++]!;
      const seen = state.get(edge.to);
      if (seen === 'open') {
        const from = stack.findIndex((f) => f.node === edge.to);
        const chain = [...stack.slice(from).map((f) => f.node), edge.to].map((n) => pointerOf(n.path)).join(' -> ');
        return { path: edge.via, message: `a $ref cycle that never reaches a value (${chain}): checking an answer would never end` };
      }
      if (seen === undefined) open(edge.to);
    }
  }
  return undefined;
}

/** `#/definitions/a` */
function pointerOf(path: SchemaPath): string {
  return ['#', ...path.map((s) => String(s).replace(/~/g, '~0').replace(/\//g, '~1'))].join('/');
}
