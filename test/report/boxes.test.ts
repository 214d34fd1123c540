/**
 * The report's drawings keep their content inside their boxes: every state of every machine chart
 * holds its name (and its count) inside its rectangle, every rectangle and every edge stays inside
 * its SVG, and the same for the task DAG. Text is measured as the page's fonts draw it: a
 * monospace character is 0.6 em wide (12 px names: 7.2 px; the DAG's 11 px labels: 6.6 px), a
 * bold digit of the 12 px count the same.
 */
import { describe, expect, it } from 'vitest';
import { machineCharts, renderChart } from '../../src/report/charts.js';
import { buildReport } from '../../src/report/index.js';
import type { TimedRunEvent } from '../../src/swarm.js';

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

const num = (tag: string, attr: string) => Number(new RegExp(`\\b${attr}="([-\\d.]+)"`).exec(tag)?.[1]);
const unescape = (s: string) => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');

/** The SVG's size, and every point its paths pass through (start, control and end points). */
function frame(svg: string): { width: number; height: number; points: [number, number][] } {
  const open = /<svg[^>]*>/.exec(svg)![0];
  const points: [number, number][] = [];
  for (const [, d] of svg.matchAll(/<path class="(?:ch|dag)-edge[^"]*" d="([^"]+)"/g)) {
    const nums = d!.match(/-?[\d.]+/g)!.map(Number);
    for (let i = 0; i + 1 < nums.length; i += 2) points.push([nums[i]!, nums[i + 1]!]);
  }
  return { width: num(open, 'width'), height: num(open, 'height'), points };
}

const inside = (b: Box, f: { width: number; height: number }) => b.x >= 0 && b.y >= 0 && b.x + b.width <= f.width && b.y + b.height <= f.height;

describe('the report drawings keep their content in their boxes', () => {
  it('every machine chart: each state name (and its count) inside its rectangle, every rectangle and edge inside the chart', () => {
    const CHAR = 7.2; // 12 px monospace
    for (const chart of machineCharts()) {
      // Counts in every state, the widest they may be drawn (a count takes room from the name).
      const counts = Object.fromEntries(chart.states.map((s) => [s.id, 12_345]));
      for (const svg of [renderChart(chart), renderChart(chart, counts)]) {
        const f = frame(svg);
        for (const [, , g] of svg.matchAll(/<g class="ch-state[^"]*" data-state="([^"]+)">([\s\S]*?)<\/g>/g)) {
          const rect = /<rect[^>]*\/>/.exec(g!)![0];
          const box: Box = { x: num(rect, 'x'), y: num(rect, 'y'), width: num(rect, 'width'), height: num(rect, 'height') };
          const texts = [...g!.matchAll(/<text([^>]*)>([^<]*)<\/text>/g)];
          const name = texts.find((t) => !t[1]!.includes('class="count"'))!;
          const nameStart = num(name[1]!, 'x');
          const nameEnd = nameStart + unescape(name[2]!).length * CHAR;
          expect(nameStart, `${chart.id}: ${name[2]} starts inside`).toBeGreaterThan(box.x);
          const count = texts.find((t) => t[1]!.includes('class="count"'));
          // A count is drawn right-aligned at its x: it ends there and starts its width before.
          const limit = count ? num(count[1]!, 'x') - unescape(count[2]!).length * CHAR - 4 : box.x + box.width - 4;
          expect(nameEnd, `${chart.id}: "${name[2]}" ends before ${count ? 'its count' : 'its box ends'} (${box.x + box.width})`).toBeLessThanOrEqual(limit);
          if (count) expect(num(count[1]!, 'x'), `${chart.id}: ${name[2]}'s count inside`).toBeLessThanOrEqual(box.x + box.width - 4);
          expect(inside(box, f), `${chart.id}: ${name[2]}'s box inside the chart (${f.width} x ${f.height})`).toBe(true);
        }
        for (const [x, y] of f.points) expect(x >= 0 && y >= 0 && x <= f.width && y <= f.height, `${chart.id}: edge point ${x},${y} inside ${f.width} x ${f.height}`).toBe(true);
      }
    }
  });

  it('the task DAG: each label inside its node, every node and edge inside the drawing', () => {
    const CHAR = 6.6; // 11 px monospace
    const ev = (at: number, e: Record<string, unknown>) => ({ ...e, at }) as unknown as TimedRunEvent;
    const long = 'a-task-with-a-name-far-longer-than-any-box-would-hold';
    const deps = { short: [], [long]: ['short'], 'x.y': [long, 'short'], back: ['x.y'] };
    const page = buildReport({ events: [ev(0, { type: 'run:started', runId: 'r', tasks: 4, deps })] });
    const svg = /<svg id="dag-svg"[\s\S]*?<\/svg>/.exec(page)![0];
    const f = frame(svg);
    const nodes = [...svg.matchAll(/<g class="dag-node[^"]*"[^>]*>([\s\S]*?)<\/g>/g)].map((m) => m[1]!);
    expect(nodes).toHaveLength(4);
    for (const g of nodes) {
      const rect = /<rect[^>]*\/>/.exec(g)![0];
      const box: Box = { x: num(rect, 'x'), y: num(rect, 'y'), width: num(rect, 'width'), height: num(rect, 'height') };
      const [, attrs, text] = /<text([^>]*)>([^<]*)<\/text>/.exec(g)!;
      const end = num(attrs!, 'x') + unescape(text!).length * CHAR;
      expect(end, `"${text}" inside its node`).toBeLessThanOrEqual(box.x + box.width);
      expect(inside(box, f)).toBe(true);
    }
    for (const [x, y] of f.points) expect(x >= 0 && y >= 0 && x <= f.width && y <= f.height, `edge point ${x},${y} inside ${f.width} x ${f.height}`).toBe(true);
  });
});
