// Writes schema/plan.schema.json from the built zod schema (npm run build runs this after tsc).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { planJsonSchema } = await import(join(root, 'dist/src/plan/jsonSchema.js'));
const file = join(root, 'schema/plan.schema.json');
mkdirSync(dirname(file), { recursive: true });
writeFileSync(file, JSON.stringify(planJsonSchema(), null, 2) + '\n');
