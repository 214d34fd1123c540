#!/usr/bin/env node
// The catalog demo's product database as an MCP server over stdio, with two read-only tools:
// `lookup_product` (one product by SKU, from products.json) and `list_categories` (the
// taxonomy of one department). The plan declares the server `trusted`, so the tool bus shares
// identical calls in flight and caches their results: the 120 products of the classify stage
// ask for the categories of only 8 departments.
//
// Try it alone: npx @modelcontextprotocol/inspector node examples/catalog-swarm/catalog-server.mjs
import { readFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const products = JSON.parse(readFileSync(new URL('./products.json', import.meta.url), 'utf8'));
const bySku = new Map(products.map((p) => [p.sku, p]));

// The shop's category tree: department -> category -> subcategories.
const TAXONOMY = {
  Kitchen: { Cooking: ['Kettles', 'Toasters', 'Blenders', 'Pans', 'Knives'], Coffee: ['Grinders', 'Mugs'], Serving: ['Bowls'] },
  'Home Office': { Furniture: ['Desks', 'Chairs', 'Monitor Arms'], Lighting: ['Desk Lamps'], Stationery: ['Notebooks', 'Pens'] },
  Living: { Storage: ['Bookshelves'], Textiles: ['Throws', 'Cushions'], Decor: ['Clocks', 'Plant Pots'], Lighting: ['Table Lamps'] },
  Bedroom: { Bedding: ['Duvets', 'Pillows'], Furniture: ['Bedside Tables'], Clocks: ['Alarm Clocks'] },
  Bathroom: { Textiles: ['Towels'], Storage: ['Shower Caddies'] },
  Outdoor: { Camping: ['Backpacks', 'Tents', 'Sleeping Bags', 'Stoves', 'Headlamps'], Hydration: ['Bottles'] },
  Sport: { Running: ['Shoes'], Fitness: ['Yoga Mats', 'Weights'], Cycling: ['Helmets'] },
  Electronics: { Audio: ['Headphones', 'Speakers'], Wearables: ['Smart Watches'], Cameras: ['Action Cameras'] },
};
const DEPARTMENTS = Object.keys(TAXONOMY);

const server = new McpServer({ name: 'swarmstate-catalog', version: '1.1.0' });
const readOnly = { readOnlyHint: true, openWorldHint: false, idempotentHint: true };

server.registerTool(
  'lookup_product',
  {
    title: 'Look up a product',
    description: 'The catalog record of one product (name, brand, department, materials, colours, dimensions, weight, price) by its SKU, e.g. CAT-001.',
    inputSchema: { sku: z.string().regex(/^CAT-\d{3}$/).describe('The product SKU, CAT-001 to CAT-120') },
    annotations: readOnly,
  },
  async ({ sku }) => {
    const product = bySku.get(sku);
    if (!product) return { isError: true, content: [{ type: 'text', text: `no product with SKU ${sku}` }] };
    return { content: [{ type: 'text', text: JSON.stringify(product) }] };
  },
);

server.registerTool(
  'list_categories',
  {
    title: 'List the categories of a department',
    description: 'The category paths ("Department > Category > Subcategory") a product of this department may be filed under.',
    inputSchema: { department: z.enum(DEPARTMENTS).describe(`One of: ${DEPARTMENTS.join(', ')}`) },
    annotations: readOnly,
  },
  async ({ department }) => {
    const paths = Object.entries(TAXONOMY[department]).flatMap(([category, subs]) => subs.map((sub) => `${department} > ${category} > ${sub}`));
    return { content: [{ type: 'text', text: paths.join('\n') }] };
  },
);

await server.connect(new StdioServerTransport());
