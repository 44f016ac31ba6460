import { AppError } from '@tes/core';
import { cancelExecution, getSteps, publicExecution } from '@tes/db';
import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';
import { ownExecution } from './own-execution';

/** Cancels a queued execution at once (200), or asks a running one to stop (202). */
export function cancelExecutionRoute({ db, metrics, logger }: GatewayDeps): KeyRoute {
  return {
    method: 'post',
    path: '/tools/executions/{id}/cancel',
    operationId: 'cancelExecution',
    scope: 'tools:execute',
    body: 'none',
    handle: async ({ req, res, auth }) => {
      const e = await ownExecution(db, auth.projectId, req.params.id as string);
      if (e.apiKeyId !== auth.keyId && auth.role !== 'ADMIN') throw new AppError('execution_cancel_not_allowed');
      const outcome = await cancelExecution(db, auth.projectId, e);
      if (outcome.kind === 'not_cancellable') {
        throw new AppError('execution_not_cancellable', 'execution_not_cancellable', { details: { status: outcome.execution.status } });
      }
      if (outcome.kind === 'cancelled') metrics.executionsTotal.inc({ tool: e.tool, status: 'cancelled' });
      logger.info('gateway.execution.cancel', { requestId: res.locals.requestId as string, executionId: e.id, projectId: e.projectId, outcome: outcome.kind });
      const steps = await getSteps(db, e.projectId, [e.id]);
      res.status(outcome.kind === 'requested' ? 202 : 200).json({ data: publicExecution(outcome.execution, steps) });
    },
  };
}
