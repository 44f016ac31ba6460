import { listEndpointDeliveries } from '@tes/db';
import type { GatewayDeps } from '../../context';
import type { KeyRoute } from '../../routing/route-spec';
import { ownEndpoint, requireProjectAdmin } from './endpoint-access';

/** An endpoint's most recent deliveries, newest first: event, execution, status, attempts, last answer, next retry. */
export function listWebhookDeliveriesRoute({ db }: GatewayDeps): KeyRoute<undefined, { limit?: number }> {
  return {
    method: 'get',
    path: '/tools/webhooks/{id}/deliveries',
    operationId: 'listWebhookDeliveries',
    scope: 'project:read',
    body: 'none',
    precheck: (_req, _operation, auth) => requireProjectAdmin(auth),
    handle: async ({ req, res, auth, query }) => {
      const e = await ownEndpoint(db, auth.projectId, req.params.id as string);
      res.json({ data: await listEndpointDeliveries(db, auth.projectId, e.id, query.limit ?? 20) });
    },
  };
}
