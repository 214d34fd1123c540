/**
 * Graph algorithms over a plan: orderings and ranks of a validated (acyclic) task graph, and the
 * cycle finder validation uses to name cycles.
 *
 * All are iterative and O(V + E): a 10,000-deep chain must not overflow the stack, and
 * the supervisor computes ranks once per run over the whole plan.
 */

/** The part of a task these functions read. */
export interface TaskNode {
  id: string;
  deps: readonly string[];
}

/** Thrown when a plan that should have been validated has a cycle (a bug in the caller). */
export class PlanCycleError extends Error {
  readonly code = 'PLAN_CYCLE';
  constructor(readonly unordered: number) {
    super(`${unordered} task(s) are on or behind a dependency cycle: validate the plan first (validatePlan)`);
    this.name = 'PlanCycleError';
  }
}

/**
 * Task ids ordered so that every task comes after all of its deps (Kahn's algorithm). Among tasks
 * that become ready together, plan order is kept, so the order is deterministic.
 * Deps naming unknown tasks are ignored. Throws PlanCycleError if the tasks are not acyclic.
 *
 * @example
 * topologicalOrder([{ id: 'b', deps: ['a'] }, { id: 'a', deps: [] }]) // ['a', 'b']
 */
export function topologicalOrder(tasks: readonly TaskNode[]): string[] {
  return tasks.length === 0 ? [] : orderIndices(tasks).map((i) => tasks[i].id);
}

/**
 * For each task, the number of tasks on the longest dependency chain from it to a task that
 * nothing depends on (a sink has rank 1; a task whose dependent has rank 3 has rank >= 4).
 * Scheduling the highest rank first starts the critical path as early as possible.
 * Assumes an acyclic plan (validate first); throws PlanCycleError otherwise.
 *
 * @example
 * criticalPathRanks([{ id: 'a', deps: [] }, { id: 'b', deps: ['a'] }]) // Map { 'a' => 2, 'b' => 1 }
 */
export function criticalPathRanks(tasks: readonly TaskNode[]): Map<string, number> {
  const ranks = new Map<string, number>();
  if (tasks.length === 0) return ranks;
  const indexOf = indexById(tasks);
  const order = orderIndices(tasks, indexOf);
  const rank = new Int32Array(tasks.length).fill(1);
  // Walking dependents before their deps, each dep's rank is final once every dependent pushed it.
  for (let k = order.length - 1; k >= 0; k--) {
    const i = order[k];
    for (const dep of tasks[i].deps) {
      const d = indexOf.get(dep);
      if (d !== undefined && rank[d] < rank[i] + 1) rank[d] = rank[i] + 1;
    }
  }
  for (let i = 0; i < tasks.length; i++) ranks.set(tasks[i].id, rank[i]);
  return ranks;
}

// ---------------------------------------------------------------------------------------------

function indexById(tasks: readonly TaskNode[]): Map<string, number> {
  const indexOf = new Map<string, number>();
  for (let i = 0; i < tasks.length; i++) if (!indexOf.has(tasks[i].id)) indexOf.set(tasks[i].id, i);
  return indexOf;
}

/** Kahn's algorithm over task indices, with a FIFO queue (an array and a head pointer). */
function orderIndices(tasks: readonly TaskNode[], indexOf = indexById(tasks)): number[] {
  const n = tasks.length;
  const waiting = new Int32Array(n);
  const dependents: number[][] = Array.from({ length: n }, () => []);
  for (let i = 0; i < n; i++) {
    for (const dep of tasks[i].deps) {
      const d = indexOf.get(dep);
      if (d === undefined) continue;
      dependents[d].push(i);
      waiting[i]++;
    }
  }
  const order: number[] = [];
  for (let i = 0; i < n; i++) if (waiting[i] === 0) order.push(i);
  for (let head = 0; head < order.length; head++) {
    for (const j of dependents[order[head]]) if (--waiting[j] === 0) order.push(j);
  }
  if (order.length < n) throw new PlanCycleError(n - order.length);
  return order;
}

// ---------------------------------------------------------------------------------------------
// Cycles: Tarjan's strongly connected components (iterative), one named cycle per component
// ---------------------------------------------------------------------------------------------

export interface Cycle {
  /** Node indices along the cycle; nodes[0] is the lowest index of its component. */
  nodes: number[];
  /** Index in edges[nodes[0]] of the edge to nodes[1] (or to itself, for a self-loop). */
  firstEdge: number;
  /** Size of the component: a tangle may hold more nodes than the one cycle named. */
  sccSize: number;
}

/**
 * One cycle per strongly connected component that has one, ordered by lowest node index. Naming
 * every elementary cycle could be exponential; one per component names each tangle exactly once.
 */
export function findCycles(edges: readonly (readonly number[])[]): Cycle[] {
  const n = edges.length;
  const comp = new Int32Array(n).fill(-1);
  const components = stronglyConnected(edges, comp);
  const cycles: Cycle[] = [];
  const parent = new Int32Array(n).fill(-1);
  const parentEdge = new Int32Array(n);
  for (const members of components) {
    let start = members[0];
    for (const m of members) if (m < start) start = m;
    const c = comp[start];
    if (members.length === 1) {
      const self = edges[start].indexOf(start);
      if (self >= 0) cycles.push({ nodes: [start], firstEdge: self, sccSize: 1 });
      continue;
    }
    // Breadth-first inside the component from start until an edge leads back to start: a shortest
    // cycle through start. Components are disjoint, so parent[] needs no reset between them.
    const queue = [start];
    parent[start] = start;
    let last = -1;
    for (let head = 0; head < queue.length && last < 0; head++) {
      const u = queue[head];
      const out = edges[u];
      for (let k = 0; k < out.length; k++) {
        const v = out[k];
        if (v === start && u !== start) {
          last = u;
          break;
        }
        if (comp[v] !== c || parent[v] !== -1) continue;
        parent[v] = u;
        parentEdge[v] = k;
        queue.push(v);
      }
    }
    const nodes: number[] = [];
    for (let v = last; v !== start; v = parent[v]) nodes.push(v);
    nodes.push(start);
    nodes.reverse();
    cycles.push({ nodes, firstEdge: parentEdge[nodes[1]], sccSize: members.length });
  }
  return cycles.sort((a, b) => a.nodes[0] - b.nodes[0]);
}

/** Tarjan's algorithm with an explicit stack, so 10,000-deep chains do not overflow. */
function stronglyConnected(edges: readonly (readonly number[])[], comp: Int32Array): number[][] {
  const n = edges.length;
  const index = new Int32Array(n).fill(-1);
  const low = new Int32Array(n);
  const onStack = new Uint8Array(n);
  const stack: number[] = [];
  const callNode: number[] = [];
  const callEdge: number[] = [];
  const components: number[][] = [];
  let counter = 0;
  const visit = (v: number) => {
    index[v] = low[v] = counter++;
    stack.push(v);
    onStack[v] = 1;
    callNode.push(v);
    callEdge.push(0);
  };
  for (let root = 0; root < n; root++) {
    if (index[root] !== -1) continue;
    visit(root);
    while (callNode.length > 0) {
      const top = callNode.length - 1;
      const v = callNode[top];
      if (callEdge[top] < edges[v].length) {
        const w = edges[v][callEdge[top]++];
        if (index[w] === -1) visit(w);
        else if (onStack[w] && index[w] < low[v]) low[v] = index[w];
        continue;
      }
      callNode.pop();
      callEdge.pop();
      if (callNode.length > 0) {
        const u = callNode[callNode.length - 1];
        if (low[v] < low[u]) low[u] = low[v];
      }
      if (low[v] !== index[v]) continue;
      const members: number[] = [];
      let w: number;
      do {
        w = stack.pop()!;
        onStack[w] = 0;
        comp[w] = components.length;
        members.push(w);
      } while (w !== v);
      components.push(members);
    }
  }
  return components;
}
