/**
 * The leases a key has out, keyed by lease id: an immutable hash trie that shares structure
 * between versions.
 *
 * Why not an array or a Map: the key's book is immutable, so `@xstate/graph` can walk the key
 * machine from shared snapshots and an old snapshot never sees a later grant. An array copied on
 * every grant and scanned on every release costs O(leases out) per event, thousands of entries
 * with 3,000 calls in flight; a mutable Map would be shared by every snapshot. Here a grant or a
 * release copies one path from the root to a leaf (32-slot branches, leaves of at most
 * LEAF_MAX): two or three small arrays at thousands of leases, whatever the count; the rest of
 * the table is the previous version's.
 */

const BITS = 5;
const MASK = (1 << BITS) - 1;
/** A leaf splits into a branch past this many entries (while hash bits are left to split on). */
const LEAF_MAX = 8;
/** The deepest shift that still has hash bits (a 32-bit hash: 0, 5, ..., 30). */
const LAST_SHIFT = 30;

type Leaf<V> = readonly V[];
interface Branch<V> {
  readonly kids: readonly (Node<V> | undefined)[];
}
type Node<V> = Leaf<V> | Branch<V>;

const isLeaf = <V>(node: Node<V>): node is Leaf<V> => Array.isArray(node);

/** FNV-1a over the id's UTF-16 units: lease ids are short (`<keyId>#<n>`). */
function hashOf(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function find<V extends { leaseId: string }>(node: Node<V> | undefined, h: number, id: string, shift: number): V | undefined {
  while (node !== undefined && !isLeaf(node)) {
    node = node.kids[(h >>> shift) & MASK];
    shift += BITS;
  }
  return node?.find((e) => e.leaseId === id);
}

function put<V extends { leaseId: string }>(node: Node<V> | undefined, h: number, value: V, shift: number): Node<V> {
  if (node === undefined) return [value];
  if (isLeaf(node)) {
    const at = node.findIndex((e) => e.leaseId === value.leaseId);
    if (at >= 0) return node.map((e, i) => (i === at ? value : e));
    if (node.length < LEAF_MAX || shift > LAST_SHIFT) return [...node, value];
    // Rare (once per LEAF_MAX entries at most): the leaf becomes a branch on this shift's bits.
    let branch: Node<V> = { kids: [] };
    for (const e of node) branch = put(branch, hashOf(e.leaseId), e, shift);
    return put(branch, h, value, shift);
  }
  const i = (h >>> shift) & MASK;
  const kids = node.kids.slice();
  kids[i] = put(node.kids[i], h, value, shift + BITS);
  return { kids };
}

function drop<V extends { leaseId: string }>(node: Node<V> | undefined, h: number, id: string, shift: number): Node<V> | undefined {
  if (node === undefined) return undefined;
  if (isLeaf(node)) {
    const at = node.findIndex((e) => e.leaseId === id);
    if (at < 0) return node;
    return node.length === 1 ? undefined : node.filter((_, i) => i !== at);
  }
  const i = (h >>> shift) & MASK;
  const kid = drop(node.kids[i], h, id, shift + BITS);
  if (kid === node.kids[i]) return node;
  const kids = node.kids.slice();
  kids[i] = kid;
  return kid === undefined && kids.every((k) => k === undefined) ? undefined : { kids };
}

function* walk<V>(node: Node<V> | undefined): Generator<V> {
  if (node === undefined) return;
  if (isLeaf(node)) yield* node;
  else for (const kid of node.kids) yield* walk(kid);
}

/** The leases out on a key. Each change returns a new table; an unchanged one is returned as is. */
export class LeaseTable<V extends { leaseId: string }> implements Iterable<V> {
  private constructor(
    private readonly root: Node<V> | undefined,
    readonly size: number,
  ) {}

  static empty<V extends { leaseId: string }>(): LeaseTable<V> {
    return new LeaseTable<V>(undefined, 0);
  }

  get(leaseId: string): V | undefined {
    return find(this.root, hashOf(leaseId), leaseId, 0);
  }

  has(leaseId: string): boolean {
    return this.get(leaseId) !== undefined;
  }

  /** With `value` added (or replacing the entry of its lease id). */
  with(value: V): LeaseTable<V> {
    const h = hashOf(value.leaseId);
    const had = find(this.root, h, value.leaseId, 0) !== undefined;
    return new LeaseTable(put(this.root, h, value, 0), had ? this.size : this.size + 1);
  }

  /** Without `leaseId`'s entry: this same table when there is none. */
  without(leaseId: string): LeaseTable<V> {
    const root = drop(this.root, hashOf(leaseId), leaseId, 0);
    return root === this.root ? this : new LeaseTable(root, this.size - 1);
  }

  [Symbol.iterator](): Iterator<V> {
    return walk(this.root);
  }

  /** Snapshots print (and serialise) the records, not the trie. */
  toJSON(): V[] {
    return [...this];
  }
}
