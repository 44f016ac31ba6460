import { AppError, isId } from '@tes/core';
import { getExecutionWithSteps, publicExecution } from '@tes/db';
import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../route-spec';

/** One execution of the caller's project, with its steps. */
export function getExecutionRoute({ db }: GatewayDeps): KeyRoute {
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
      res.json({ data: publicExecution(found.execution, found.steps) });
    },
  };
}
