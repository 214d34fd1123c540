/**
 * zod, loaded when the first plan is checked (or a schema built), not with
 * `import 'swarmstate'` (issue 27: about a third of the import). The plan's checks are
 * synchronous (`validatePlan`, `parsePlan`), so it is required: zod's CommonJS build, the same
 * code as its ES module. A zod schema a plan written in code gives (`output.schema`) may come
 * from the application's ES module instance: it is recognised by its `_zod` internals (not by
 * `instanceof`), and zod keeps its metadata registry on a global that both instances share.
 * The schemas themselves are built on first use too (schema.ts `planSchemas`).
 */
import { createRequire } from 'node:module';
import type { z } from 'zod';

export type Zod = typeof z;

let loaded: Zod | undefined;

export function zod(): Zod {
  return (loaded ??= (createRequire(import.meta.url)('zod') as { z: Zod }).z);
}
