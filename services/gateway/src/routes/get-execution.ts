import { AppError, isId } from '@tes/core';
import { getExecutionWithSteps, withQueuePlace } from '@tes/db';
import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';
import { sendJson } from '../respond';
import { executionBody, preferenceApplied, preferredWaitSeconds, waitForEnd } from '../push/wait';

/**
 * One execution of the caller's project, with its steps (and its place in line while queued);
 * with `Prefer: wait=N`, once it ended or after N seconds.
 */
export function getExecutionRoute({ db, changes, keys, held }: GatewayDeps): KeyRoute {
  return {
    method: 'get',
    path: '/tools/executions/{id}',
    operationId: 'getExecution',
    scope: 'executions:read',
    body: 'none',
    handle: async ({ req, res, auth }) => {
      const id = req.params.id as string;
      const found = isId('exe', id) ? await getExecutionWithSteps(db, auth.projectId, id) : null;
      if (!found) throw new AppError('execution_not_found');
      const wait = preferredWaitSeconds(req);
      if (wait === null) {
        sendJson(res, 200, executionBody(await withQueuePlace(db, found)));
        return;
      }
      const { view, applied } = await waitForEnd(
        changes,
        req,
        { projectId: auth.projectId, organizationId: auth.organizationId, lookupId: auth.lookupId, keys, held },
        found,
        wait,
      );
      if (applied) preferenceApplied(res, wait);
      sendJson(res, 200, executionBody(view));
    },
  };
}
