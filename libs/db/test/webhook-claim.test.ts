import { claimDueDeliveries, createProject, createWebhookEndpoint, creditBalance } from '@tes/db';
import { addKey, seedProject, submitTestExecution, useTestDatabase } from '@tes/testing';

/**
 * The webhook claim's fair share (issue #25): each slot goes to the oldest due delivery of the
 * project with the fewest attempts in flight, within the caps per project and organization.
 */
const { db } = useTestDatabase({ poolMax: 4 });

/** `n` due deliveries of a new endpoint of `project`, due 1 min ago and 1 ms apart. */
async function due(project: { projectId: string; keyId: string }, n: number): Promise<void> {
  const executionId = await submitTestExecution(db, project, { reservedMicros: 100 });
  const endpoint = await createWebhookEndpoint(db, { projectId: project.projectId, url: 'https://hooks.test/' });
  await db.raw(
    `INSERT INTO webhook_deliveries (id, endpoint_id, project_id, execution_id, event_type, next_attempt_at)
     SELECT 'msg_' || md5(random()::text), ?, ?, ?, 'execution.succeeded', now() - interval '1 minute' + g * interval '1 ms'
       FROM generate_series(1, ?) g`,
    [endpoint.id, project.projectId, executionId, n],
  );
}

it('gives the next slot to the project with the fewest in flight, and keeps each project and organization within its cap', async () => {
  const p1 = await seedProject(db, { creditMicros: 10_000 });
  const { id: p2Id } = await createProject(db, { organizationId: p1.organizationId, name: 'sibling' });
  await creditBalance(db, { projectId: p2Id, micros: 10_000, reference: 'test' });
  const p2 = { ...p1, projectId: p2Id, keyId: (await addKey(db, p2Id)).id };
  const q = await seedProject(db, { creditMicros: 10_000 });
  // p1's deliveries are the oldest, then p2's, then q's
  await due(p1, 5);
  await due(p2, 5);
  await due(q, 5);

  const claimed = await claimDueDeliveries(db, {
    limit: 6,
    perProject: 4,
    perOrganization: 5,
    leaseMs: 60_000,
    // p1 has 2 attempts in flight already: its organization too
    inFlight: { projects: new Map([[p1.projectId, 2]]), organizations: new Map([[p1.organizationId, 2]]) },
  });
  const byProject = (id: string) => claimed.filter((d) => d.projectId === id).length;
  // q (none in flight, an organization of its own) takes 3; p1's organization may add only 3 to its 2
  expect(byProject(q.projectId)).toBe(3);
  expect(byProject(p1.projectId) + byProject(p2.projectId)).toBe(3);
  // p2, with none in flight, goes before p1 although p1's deliveries are older
  expect(byProject(p2.projectId)).toBeGreaterThanOrEqual(2);
  expect(claimed.every((d) => d.organizationId === (d.projectId === q.projectId ? q.organizationId : p1.organizationId))).toBe(true);

  // a project at its cap gets nothing, however old its deliveries
  const next = await claimDueDeliveries(db, {
    limit: 16,
    perProject: 4,
    perOrganization: 16,
    leaseMs: 60_000,
    inFlight: { projects: new Map([[p1.projectId, 4]]), organizations: new Map() },
  });
  expect(next.some((d) => d.projectId === p1.projectId)).toBe(false);
  expect(next.map((d) => d.projectId).sort()).toEqual([...Array<string>(5 - byProject(p2.projectId)).fill(p2.projectId), q.projectId, q.projectId].sort());
});
