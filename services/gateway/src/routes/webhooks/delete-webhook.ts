import { AppError, isId } from '@tes/core';
import { deleteWebhookEndpoint } from '@tes/db';
import type { GatewayDeps } from '../../context';
import type { KeyRoute } from '../../routing/route-spec';
import { requireProjectAdmin } from './endpoint-access';

/** Deletes an endpoint of the caller's project: nothing more is sent to it; its pending deliveries end failed. */
export function deleteWebhookRoute({ db }: GatewayDeps): KeyRoute {
  return {
    method: 'delete',
    path: '/tools/webhooks/{id}',
    operationId: 'deleteWebhookEndpoint',
    scope: 'project:read',
    body: 'none',
    precheck: (_req, _operation, auth) => requireProjectAdmin(auth),
    handle: async ({ req, res, auth }) => {
      const id = req.params.id as string;
      // fenced by the project in the statement itself: another project's id deletes nothing
      if (!isId('whk', id) || !(await deleteWebhookEndpoint(db, id, auth.projectId))) throw new AppError('webhook_endpoint_not_found');
      res.json({ data: { id, deleted: true } });
    },
  };
}
