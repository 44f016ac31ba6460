import { HeldConnections, isRefusal, type HeldPlace, type HeldRefusal } from '../src/push/held-connections';

/** The shares of held connections (streams and waits), driven directly. */
const shares = { perProcess: 8, perOrganization: 4, perProject: 3 };

function place(taken: HeldPlace | HeldRefusal): HeldPlace {
  if (isRefusal(taken)) throw new Error(`refused: ${taken.share}`);
  return taken;
}

it('refuses beyond the project share, then the organization share, and frees a place when released', () => {
  const held = new HeldConnections(shares);
  const a = { projectId: 'prj_a', organizationId: 'org_1' };
  const b = { projectId: 'prj_b', organizationId: 'org_1' };
  const mine = [1, 2, 3].map(() => place(held.take(a, 'stream', () => undefined)));
  expect(held.take(a, 'stream', () => undefined)).toEqual({ share: 'project', limit: 3 });
  place(held.take(b, 'wait', () => undefined));
  expect(held.take(b, 'wait', () => undefined)).toEqual({ share: 'organization', limit: 4 });
  mine[0]!.release();
  mine[0]!.release(); // once only
  expect(held.held).toBe(3);
  place(held.take(b, 'wait', () => undefined));
  expect(held.heldBy('prj_b')).toBe(2);
});

it('a full process gives a project holding fewer the largest holder’s oldest place, until the holders are level', () => {
  const seen: string[] = [];
  const held = new HeldConnections(shares, (kind, outcome) => seen.push(`${kind} ${outcome}`));
  const ended: string[] = [];
  const holders = ['a', 'b', 'c'].map((p) => ({ projectId: `prj_${p}`, organizationId: `org_${p}` }));
  // a: 3, b: 3, c: 2 → the process (8) is full
  for (const [i, n] of [3, 3, 2].entries())
    for (let k = 0; k < n; k++) place(held.take(holders[i]!, 'stream', () => ended.push(`${holders[i]!.projectId}#${k}`)));
  expect(held.held).toBe(8);
  const d = { projectId: 'prj_d', organizationId: 'org_d' };
  place(held.take(d, 'wait', () => ended.push('d')));
  expect(ended).toEqual(['prj_a#0']); // the first largest holder's oldest
  expect(held.held).toBe(8);
  place(held.take(d, 'wait', () => ended.push('d')));
  expect(ended).toEqual(['prj_a#0', 'prj_b#0']);
  // a 2, b 2, c 2, d 2: no one holds two more than d
  expect(held.take(d, 'wait', () => undefined)).toEqual({ share: 'process', limit: 8 });
  expect(held.take(holders[0]!, 'stream', () => undefined)).toEqual({ share: 'process', limit: 8 });
  expect(held.held).toBe(8);
  expect(seen).toEqual(['stream preempted', 'stream preempted', 'wait refused', 'stream refused']);
});
