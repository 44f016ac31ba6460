import type { ExecutionStatus } from '@tes/core';
import { getSteps, listExecutions, publicExecution, queuePlaces } from '@tes/db';
import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';

/** The query parameters Limit, Before, StatusFilter and ToolFilter, as their schemas admit them. */
interface ListQuery {
  limit?: number;
  before?: string;
  status?: ExecutionStatus;
  tool?: string;
}

/** The project's executions, newest first, a page at a time; the queued ones with their place in line. */
export function listExecutionsRoute({ db }: GatewayDeps): KeyRoute<undefined, ListQuery> {
  return {
    method: 'get',
    path: '/tools/executions',
    operationId: 'listExecutions',
    scope: 'executions:read',
    body: 'none',
    handle: async ({ res, auth, query }) => {
      const { items, hasMore } = await listExecutions(db, {
        projectId: auth.projectId,
        limit: query.limit ?? 20,
        before: query.before,
        status: query.status,
        tool: query.tool,
      });
      const [steps, places] = await Promise.all([
        getSteps(
          db,
          auth.projectId,
          items.map((e) => e.id),
        ),
        queuePlaces(
          db,
          items.filter((e) => e.status === 'queued').map((e) => e.id),
        ),
      ]);
      res.json({
        data: items.map((e) => publicExecution(e, steps, places.get(e.id))),
        hasMore,
        nextBefore: hasMore ? (items[items.length - 1]?.id ?? null) : null,
      });
    },
  };
}
