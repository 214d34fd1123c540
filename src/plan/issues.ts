/**
 * zod's structural issues as PlanIssues: one per problem, a path a person can find
 * (`tasks[3].deps[0]`), messages that name the input's kind and never its value (an input may
 * be a secret), and "did you mean" for near-miss field names.
 */
import type { z } from 'zod';
import { planSchemas } from './schema.js';
import { formatPath, issue, kindOf, nearest, withArticle } from './problems.js';
import type { PlanIssue } from './validate.js';

export { formatPath, isRecord, issue, kindOf, nearest, unknownName } from './problems.js';

// ---------------------------------------------------------------------------------------------
// Structure: zod issues as PlanIssues, one per problem, with a path a person can find
// ---------------------------------------------------------------------------------------------

type ZodIssue = z.core.$ZodIssue;

/** Messages that describe the input by its kind only: an input value may be a secret. */
export const plainMessages: z.core.$ZodErrorMap = (iss) => {
  if (iss.code !== 'invalid_type') return undefined;
  if (iss.input === undefined) return 'required';
  if (iss.expected === 'int' && typeof iss.input === 'number') return 'must be an integer';
  // A table of names is parsed as a map (schema.ts nameRecord); the plan writes it as a record.
  const expected = iss.expected === 'int' ? 'an integer' : withArticle(iss.expected === 'map' ? 'record' : iss.expected);
  return `expected ${expected}, got ${kindOf(iss.input)}`;
};

export function structuralIssues(zodIssues: readonly ZodIssue[]): PlanIssue[] {
  const out: PlanIssue[] = [];
  for (const zi of zodIssues) addZodIssue(zi, [], out);
  return out;
}

function addZodIssue(zi: ZodIssue, prefix: PropertyKey[], out: PlanIssue[]) {
  const path = [...prefix, ...zi.path];
  switch (zi.code) {
    case 'unrecognized_keys': {
      // Inside a key object, an unknown field's name could itself be a pasted secret.
      if (isKeyPath(path)) {
        out.push(issue(path, 'a key object has only the field "env"'));
        break;
      }
      const known = fieldsAt(path);
      for (const key of zi.keys) {
        const guess = nearest(key, known);
        out.push(issue([...path, key], `unknown field${guess ? ` (did you mean "${guess}"?)` : ''}`));
      }
      break;
    }
    case 'invalid_union': {
      // When the input has the shape of exactly one alternative, its own issues say more.
      const shaped = zi.errors.filter((branch) => !branch.some((b) => b.code === 'invalid_type' && b.path.length === 0));
      if (shaped.length === 1) for (const b of shaped[0]) addZodIssue(b, path, out);
      else out.push(issue(path, zi.message));
      break;
    }
    case 'invalid_key':
      out.push(issue(path, zi.issues[0]?.message ?? zi.message));
      break;
    default:
      out.push(issue(path, zi.message));
  }
}

/** `providers.main.keys[1]` or anything below it. */
function isKeyPath(path: readonly PropertyKey[]): boolean {
  return path[0] === 'providers' && path[2] === 'keys' && path.length >= 4;
}

/** The field names the schema allows at `path`, for "did you mean" on unknown fields. */
function fieldsAt(path: readonly PropertyKey[]): string[] {
  let def = unwrap(planSchemas().PlanSchema._zod.def);
  for (const seg of path) {
    if (def.type === 'object') def = (def as z.core.$ZodObjectDef).shape[seg as string]?._zod.def;
    else if (def.type === 'record') def = (def as z.core.$ZodRecordDef).valueType._zod.def;
    else if (def.type === 'map') def = (def as z.core.$ZodMapDef).valueType._zod.def;
    else if (def.type === 'array') def = (def as z.core.$ZodArrayDef).element._zod.def;
    else return [];
    if (def === undefined) return [];
    def = unwrap(def);
  }
  return def.type === 'object' ? Object.keys((def as z.core.$ZodObjectDef).shape) : [];
}

function unwrap(def: z.core.$ZodTypeDef): z.core.$ZodTypeDef {
  for (;;) {
    if (def.type === 'optional' || def.type === 'default' || def.type === 'prefault') def = (def as z.core.$ZodOptionalDef).innerType._zod.def;
    else if (def.type === 'pipe') {
      // A table of names (schema.ts nameRecord) is a map between a preprocess and a transform.
      const pipe = def as z.core.$ZodPipeDef;
      def = pipe.in._zod.def.type === 'transform' ? pipe.out._zod.def : pipe.in._zod.def;
    } else return def;
  }
}
