/**
 * A small layered graph layout for the report's drawings (the task DAG and the statecharts), so
 * the page needs no library: cycles are broken by reversing DFS back edges, layers are the
 * longest path from a source, and each layer is ordered by the mean position of its nodes'
 * predecessors (two sweeps). Layers run left to right. Deterministic: same graph, same picture.
 */

export interface LayoutNode {
  id: string;
  width: number;
  height: number;
}
export interface Placed extends LayoutNode {
  x: number;
  y: number;
  layer: number;
}
export interface Layout {
  nodes: Map<string, Placed>;
  width: number;
  height: number;
}

const GAP_X = 56;
const GAP_Y = 14;
const PAD = 8;

export function layered(nodes: readonly LayoutNode[], edges: readonly (readonly [string, string])[]): Layout {
  const ids = new Set(nodes.map((n) => n.id));
  const out = new Map<string, string[]>();
  for (const n of nodes) out.set(n.id, []);
  for (const [a, b] of edges) if (ids.has(a) && ids.has(b) && a !== b) out.get(a)!.push(b);

  // Back edges (to a node still on the DFS stack) point backwards: left out of the layering.
  const forward = new Map<string, string[]>([...out.keys()].map((k) => [k, []]));
  const mark = new Map<string, 1 | 2>();
  for (const root of out.keys()) {
    if (mark.has(root)) continue;
    const stack: [string, number][] = [[root, 0]];
    mark.set(root, 1);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const next = out.get(top[0])![top[1]++];
      if (next === undefined) {
        mark.set(top[0], 2);
        stack.pop();
      } else if (!mark.has(next)) {
        forward.get(top[0])!.push(next);
        mark.set(next, 1);
        stack.push([next, 0]);
      } else if (mark.get(next) === 2) {
        forward.get(top[0])!.push(next);
      }
    }
  }

  // Longest path from a source, in topological order (Kahn).
  const indeg = new Map<string, number>([...forward.keys()].map((k) => [k, 0]));
  for (const targets of forward.values()) for (const t of targets) indeg.set(t, indeg.get(t)! + 1);
  const layer = new Map<string, number>();
  const queue = [...forward.keys()].filter((k) => indeg.get(k) === 0);
  for (const k of queue) layer.set(k, 0);
  for (let i = 0; i < queue.length; i++) {
    const k = queue[i]!;
    for (const t of forward.get(k)!) {
      layer.set(t, Math.max(layer.get(t) ?? 0, layer.get(k)! + 1));
      indeg.set(t, indeg.get(t)! - 1);
      if (indeg.get(t) === 0) queue.push(t);
    }
  }

  const layers: string[][] = [];
  for (const n of nodes) (layers[layer.get(n.id) ?? 0] ??= []).push(n.id);
  const preds = new Map<string, string[]>([...forward.keys()].map((k) => [k, []]));
  for (const [k, targets] of forward) for (const t of targets) preds.get(t)!.push(k);
  const index = new Map<string, number>();
  const indexLayer = (l: string[]) => l.forEach((id, i) => index.set(id, i));
  layers.forEach((l) => indexLayer(l ?? []));
  for (let sweep = 0; sweep < 2; sweep++) {
    for (let li = 1; li < layers.length; li++) {
      const l = layers[li] ?? [];
      const key = (id: string) => {
        const p = preds.get(id)!;
        return p.length === 0 ? index.get(id)! : p.reduce((a, q) => a + index.get(q)!, 0) / p.length;
      };
      const keys = new Map(l.map((id) => [id, key(id)]));
      l.sort((a, b) => keys.get(a)! - keys.get(b)! || index.get(a)! - index.get(b)!);
      indexLayer(l);
    }
  }

  const byId = new Map(nodes.map((n) => [n.id, n]));
  const placed = new Map<string, Placed>();
  let x = PAD;
  let height = 0;
  layers.forEach((l, li) => {
    if (!l) return;
    const w = Math.max(...l.map((id) => byId.get(id)!.width));
    let y = PAD;
    for (const id of l) {
      const n = byId.get(id)!;
      placed.set(id, { ...n, x, y, layer: li });
      y += n.height + GAP_Y;
    }
    height = Math.max(height, y - GAP_Y + PAD);
    x += w + GAP_X;
  });
  return { nodes: placed, width: Math.max(x - GAP_X + PAD, 2 * PAD), height: Math.max(height, 2 * PAD) };
}

/** An edge as a cubic curve from the right side of `a` to the left side of `b` (or looping back). */
export function edgePath(a: Placed, b: Placed): string {
  const y1 = a.y + a.height / 2;
  const y2 = b.y + b.height / 2;
  if (b.layer > a.layer) {
    const x1 = a.x + a.width;
    const x2 = b.x;
    const mx = (x1 + x2) / 2;
    return `M${x1} ${y1}C${mx} ${y1} ${mx} ${y2} ${x2} ${y2}`;
  }
  // Same layer or backwards: leave and enter from below, bending under both.
  const x1 = a.x + a.width / 2;
  const x2 = b.x + b.width / 2;
  const yb = Math.max(a.y + a.height, b.y + b.height) + 18;
  return `M${x1} ${a.y + a.height}C${x1} ${yb} ${x2} ${yb} ${x2} ${b.y + b.height}`;
}
