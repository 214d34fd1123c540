#!/usr/bin/env node
// The catalog demo's product database as an MCP server over stdio: one read-only tool,
// `lookup_product`, answering from products.json (written by generate.ts). The plan declares
// it `trusted`, so the tool bus may share identical lookups and cache them.
//
// Try it alone: npx @modelcontextprotocol/inspector node examples/catalog-swarm/catalog-server.mjs
import { readFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const products = JSON.parse(readFileSync(new URL('./products.json', import.meta.url), 'utf8'));
const bySku = new Map(products.map((p) => [p.sku, p]));

const server = new McpServer({ name: 'swarmstate-catalog', version: '1.0.0' });

server.registerTool(
  'lookup_product',
  {
    title: 'Look up a product',
    description: 'The catalog record of one product (name, brand, department, materials, colours, dimensions, weight, price) by its SKU, e.g. CAT-001.',
    inputSchema: { sku: z.string().regex(/^CAT-\d{3}$/).describe('The product SKU, CAT-001 to CAT-120') },
    annotations: { readOnlyHint: true, openWorldHint: false, idempotentHint: true },
  },
  async ({ sku }) => {
    const product = bySku.get(sku);
    if (!product) return { isError: true, content: [{ type: 'text', text: `no product with SKU ${sku}` }] };
    return { content: [{ type: 'text', text: JSON.stringify(product) }] };
  },
);

await server.connect(new StdioServerTransport());
