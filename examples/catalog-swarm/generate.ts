/**
 * Writes the catalog demo: `products.json` (what the catalog MCP server serves) and `plan.json`
 * (120 products, each through extract -> classify -> translate x3 -> SEO -> review, and one
 * report over all the reviews). Both are made from the small tables below and the stage prompts
 * in `prompts/`, with no randomness: running it again gives the same files.
 *
 * Run: npx tsx examples/catalog-swarm/generate.ts   (test/demo.test.ts checks the files are current)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Product {
  sku: string;
  name: string;
  brand: string;
  department: string;
  materials: string[];
  colours: string[];
  dimensionsCm: [number, number, number];
  weightKg: number;
  priceEur: number;
}

/** The languages every product is translated into: code and name. */
export const LANGUAGES: readonly [string, string][] = [
  ['de', 'German'],
  ['fr', 'French'],
  ['es', 'Spanish'],
];

// 40 kinds of product x 3 brands = 120 products.
const KINDS: [name: string, department: string, material: string, dims: [number, number, number], kg: number, eur: number][] = [
  ['Kettle 1.7 L', 'Kitchen', 'stainless steel', [22, 16, 25], 1.1, 39],
  ['Toaster 2-slot', 'Kitchen', 'brushed steel', [28, 18, 20], 1.6, 45],
  ['Blender 1.5 L', 'Kitchen', 'glass', [18, 18, 42], 3.2, 79],
  ['Chef Knife 20 cm', 'Kitchen', 'carbon steel', [33, 5, 2], 0.2, 59],
  ['Cast Iron Pan 28 cm', 'Kitchen', 'cast iron', [48, 29, 6], 2.9, 49],
  ['Coffee Grinder', 'Kitchen', 'ceramic burr', [12, 12, 30], 1.4, 69],
  ['Stoneware Mug 350 ml', 'Kitchen', 'stoneware', [12, 9, 10], 0.4, 14],
  ['Salad Bowl', 'Kitchen', 'acacia wood', [28, 28, 12], 0.9, 29],
  ['Desk Lamp', 'Home Office', 'aluminium', [15, 15, 45], 1.2, 49],
  ['Standing Desk 140 cm', 'Home Office', 'oak veneer', [140, 70, 120], 32, 499],
  ['Office Chair', 'Home Office', 'mesh', [66, 66, 110], 14, 289],
  ['Monitor Arm', 'Home Office', 'steel', [50, 12, 45], 2.4, 89],
  ['Notebook A5', 'Home Office', 'recycled paper', [21, 15, 1], 0.3, 12],
  ['Fountain Pen', 'Home Office', 'brass', [14, 2, 2], 0.05, 65],
  ['Bookshelf 5-tier', 'Living', 'pine', [80, 30, 180], 28, 159],
  ['Wool Throw', 'Living', 'merino wool', [130, 170, 1], 1.1, 89],
  ['Floor Cushion', 'Living', 'linen', [60, 60, 15], 1.5, 45],
  ['Wall Clock', 'Living', 'walnut', [30, 5, 30], 0.8, 39],
  ['Table Lamp', 'Living', 'ceramic', [25, 25, 40], 2.1, 69],
  ['Plant Pot 20 cm', 'Living', 'terracotta', [20, 20, 18], 1.9, 19],
  ['Duvet 200x200', 'Bedroom', 'cotton percale', [200, 200, 3], 1.8, 119],
  ['Pillow', 'Bedroom', 'memory foam', [60, 40, 12], 1.3, 49],
  ['Bedside Table', 'Bedroom', 'birch plywood', [45, 35, 55], 8, 99],
  ['Alarm Clock', 'Bedroom', 'ABS plastic', [10, 6, 10], 0.3, 25],
  ['Bath Towel', 'Bathroom', 'organic cotton', [70, 140, 1], 0.6, 24],
  ['Shower Caddy', 'Bathroom', 'bamboo', [30, 12, 60], 0.9, 29],
  ['Hiking Backpack 30 L', 'Outdoor', 'ripstop nylon', [30, 20, 55], 1.1, 89],
  ['Tent 2-person', 'Outdoor', 'polyester', [210, 130, 105], 2.6, 179],
  ['Sleeping Bag', 'Outdoor', 'down', [80, 220, 4], 1.2, 149],
  ['Camping Stove', 'Outdoor', 'aluminium', [12, 12, 10], 0.3, 49],
  ['Water Bottle 750 ml', 'Outdoor', 'stainless steel', [8, 8, 27], 0.4, 25],
  ['Headlamp', 'Outdoor', 'polycarbonate', [6, 4, 4], 0.1, 35],
  ['Running Shoes', 'Sport', 'engineered mesh', [32, 12, 11], 0.6, 119],
  ['Yoga Mat', 'Sport', 'natural rubber', [183, 61, 1], 2.5, 59],
  ['Dumbbell Set 10 kg', 'Sport', 'cast iron', [35, 15, 15], 10, 69],
  ['Bicycle Helmet', 'Sport', 'EPS foam', [27, 20, 17], 0.3, 79],
  ['Wireless Headphones', 'Electronics', 'aluminium', [19, 16, 8], 0.25, 199],
  ['Bluetooth Speaker', 'Electronics', 'fabric', [18, 7, 7], 0.6, 89],
  ['Smart Watch', 'Electronics', 'titanium', [4, 4, 1], 0.05, 299],
  ['Action Camera', 'Electronics', 'magnesium alloy', [6, 4, 4], 0.15, 249],
];
const BRANDS: [name: string, priceFactor: number, colours: string[]][] = [
  ['Nordlys', 1.2, ['snow white', 'fjord blue']],
  ['Kumo', 1, ['charcoal', 'sand', 'moss green']],
  ['Verde', 0.85, ['olive', 'terracotta red']],
];

/** The 120 products, in SKU order. */
export function products(): Product[] {
  return KINDS.flatMap(([kind, department, material, dims, kg, eur], k) =>
    BRANDS.map(([brand, factor, colours], b): Product => ({
      sku: `CAT-${String(k * BRANDS.length + b + 1).padStart(3, '0')}`,
      name: `${brand} ${kind}`,
      brand,
      department,
      materials: [material],
      colours,
      dimensionsCm: dims,
      weightKg: kg,
      priceEur: (Math.round(eur * factor) * 100 - 1) / 100, // 46.99, not 46.989999
    })),
  );
}

/** A stage prompt file: the system text, a `---` line, then the prompt. `%NAME%` are filled in. */
function stage(dir: string, name: string, vars: Record<string, string>): { system: string; prompt: string } {
  let text = readFileSync(join(dir, 'prompts', `${name}.md`), 'utf8');
  for (const [k, v] of Object.entries(vars)) text = text.replaceAll(`%${k}%`, v);
  const [system, prompt] = text.split(/^---$/m).map((s) => s.trim());
  if (!system || !prompt) throw new Error(`prompts/${name}.md: expected "system\\n---\\nprompt"`);
  return { system, prompt };
}

/** The demo plan (as written to plan.json). */
export function buildPlan(dir: string = here()): Record<string, unknown> {
  const tasks: Record<string, unknown>[] = [];
  for (const { sku } of products()) {
    const id = (step: string) => `${sku}.${step}`;
    const translations = LANGUAGES.map(([code]) => id(`translate.${code}`));
    tasks.push({ id: id('extract'), model: 'cheap', tools: ['catalog.lookup_product'], maxTokens: 200, ...stage(dir, 'extract', { SKU: sku }) });
    tasks.push({ id: id('classify'), model: 'cheap', deps: [id('extract')], maxTokens: 32, ...stage(dir, 'classify', { SKU: sku }) });
    for (const [code, language] of LANGUAGES) {
      tasks.push({ id: id(`translate.${code}`), model: 'mid', deps: [id('extract'), id('classify')], maxTokens: 160, ...stage(dir, 'translate', { SKU: sku, LANGUAGE: language }) });
    }
    tasks.push({ id: id('seo'), model: 'mid', deps: [id('classify'), ...translations], maxTokens: 200, ...stage(dir, 'seo', { SKU: sku }) });
    tasks.push({ id: id('review'), model: 'strong', deps: [id('extract'), id('seo')], maxTokens: 24, ...stage(dir, 'review', { SKU: sku }) });
  }
  const reviews = products().map(({ sku }) => `${sku}.review`);
  tasks.push({ id: 'report', model: 'strong', deps: reviews, maxTokens: 600, ...stage(dir, 'report', {}) });

  return {
    providers: {
      sim: {
        type: 'sim',
        keys: ['sim-catalog-key-1', 'sim-catalog-key-2', 'sim-catalog-key-3'],
        // What the runtime is told about EACH key: of the order of a mid Anthropic tier. Tokens
        // may burst 15 s of their rate (output is held as maxTokens until a reply ends, so a
        // one-second bucket of 500 tokens would let about one call out at a time); requests go
        // evenly. Output is what binds this run: about 47,000 tokens at 3 x 24,000 a minute.
        limits: { rpm: 1000, itpm: 120000, otpm: 30000, burst: { itpm: 30000, otpm: 6000 }, concurrency: 8 },
        sim: {
          ttftMs: [50, 300],
          tokensPerSecond: 300,
          // The server enforces a tighter otpm than the plan states (a key shared with another
          // app, say): a few requests the runtime lets out get a 429, and are retried.
          limits: { rpm: 1000, itpm: 120000, otpm: 24000, burst: { itpm: 30000, otpm: 6000 } },
          faults: { http500: 0.01, http529: 0.02, reset: 0.01 },
        },
      },
    },
    models: {
      cheap: { provider: 'sim', model: 'claude-haiku-4-5', maxTokens: 256, price: { input: 1, output: 5 } },
      mid: { provider: 'sim', model: 'claude-sonnet-4-5', maxTokens: 512, price: { input: 3, output: 15 } },
      strong: { provider: 'sim', model: 'claude-opus-4-5', maxTokens: 1024, price: { input: 5, output: 25 } },
    },
    defaults: { maxInFlight: 24, maxRetries: 10, taskTimeoutMs: 30000, onFailure: 'continue' },
    tools: {
      // Run from the package root: the path is relative to the working directory (see README).
      servers: { catalog: { command: 'node', args: ['catalog-server.mjs'], trusted: true } },
    },
    tasks,
  };
}

/** products.json as written: one product a line. */
export function productsJson(): string {
  return `[\n${products().map((p) => `  ${JSON.stringify(p)}`).join(',\n')}\n]\n`;
}

/** plan.json as written: the settings indented, then one task a line (841 of them). */
export function planJson(plan: Record<string, unknown>): string {
  const { tasks, ...settings } = plan as { tasks: unknown[] };
  const head = JSON.stringify(settings, null, 2).slice(0, -2); // without the closing "\n}"
  return `${head},\n  "tasks": [\n${tasks.map((t) => `    ${JSON.stringify(t)}`).join(',\n')}\n  ]\n}\n`;
}

function here(): string {
  return dirname(fileURLToPath(import.meta.url));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const dir = here();
  writeFileSync(join(dir, 'products.json'), productsJson());
  writeFileSync(join(dir, 'plan.json'), planJson(buildPlan(dir)));
  console.log(`wrote ${join(dir, 'products.json')} and ${join(dir, 'plan.json')}`);
}
