import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LeaseTable } from '../../machines/leaseTable.js';

type Entry = { leaseId: string; n: number };

/** Every array and object of a table's trie, by identity (reaching into its private root). */
function nodesOf(table: LeaseTable<Entry>): Set<object> {
  const seen = new Set<object>();
  const visit = (node: unknown) => {
    if (node === undefined || typeof node !== 'object' || node === null) return;
    seen.add(node);
    if (Array.isArray(node)) return;
    const { kids } = node as { kids: unknown[] };
    seen.add(kids);
    for (const kid of kids) visit(kid);
  };
  visit((table as unknown as { root: unknown }).root);
  return seen;
}

const contents = (table: LeaseTable<Entry>) => [...table].map((e) => `${e.leaseId}=${e.n}`).sort();

describe('LeaseTable', () => {
  it('behaves as a Map, and every earlier version stays as it was', () => {
    const op = fc.record({ add: fc.boolean(), id: fc.integer({ min: 0, max: 400 }), n: fc.nat() });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 600 }), (ops) => {
        let table = LeaseTable.empty<Entry>();
        const model = new Map<string, number>();
        const versions: Array<[LeaseTable<Entry>, string[]]> = [];
        for (const { add, id, n } of ops) {
          const leaseId = `k#${id}`;
          if (add) {
            table = table.with({ leaseId, n });
            model.set(leaseId, n);
          } else {
            const before = table;
            table = table.without(leaseId);
            if (!model.delete(leaseId)) expect(table).toBe(before); // nothing to drop: the same table
          }
          expect(table.size).toBe(model.size);
          expect(table.get(leaseId)?.n).toBe(model.get(leaseId));
          if (versions.length < 50) versions.push([table, contents(table)]);
        }
        expect(contents(table)).toEqual([...model].map(([k, v]) => `${k}=${v}`).sort());
        for (const [version, seen] of versions) expect(contents(version)).toEqual(seen);
      }),
      { seed: 7, numRuns: 100 },
    );
  });

  it('at 3,000 leases a grant or a release builds a handful of nodes and shares the rest', () => {
    let table = LeaseTable.empty<Entry>();
    for (let i = 0; i < 3_000; i++) table = table.with({ leaseId: `key#${i}`, n: i });
    const fresh = (before: LeaseTable<Entry>, after: LeaseTable<Entry>) => {
      const old = nodesOf(before);
      return [...nodesOf(after)].filter((node) => !old.has(node)).length;
    };
    const added = table.with({ leaseId: 'key#3000', n: 3_000 });
    expect(fresh(table, added)).toBeLessThanOrEqual(8);
    const dropped = added.without('key#17');
    expect(fresh(added, dropped)).toBeLessThanOrEqual(8);
    expect(nodesOf(table).size).toBeGreaterThan(300); // the table is not small: sharing is what makes it cheap
    expect(dropped.size).toBe(3_000);
    expect(dropped.get('key#17')).toBeUndefined();
    expect(dropped.get('key#3000')?.n).toBe(3_000);
  });
});
