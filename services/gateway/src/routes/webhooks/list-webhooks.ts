import { listWebhookEndpoints } from '@tes/db';
import type { GatewayDeps } from '../../context';
import type { KeyRoute } from '../../routing/route-spec';
import { publicEndpoint, requireProjectAdmin } from './endpoint-access';

/** The caller's project's live endpoints, oldest first, without their secrets. */
export function listWebhooksRoute({ db }: GatewayDeps): KeyRoute {
  return {
    method: 'get',
    path: '/tools/webhooks',
    operationId: 'listWebhookEndpoints',
    scope: 'project:read',
    body: 'none',
    precheck: (_req, _operation, auth) => requireProjectAdmin(auth),
    handle: async ({ res, auth }) => {
      res.json({ data: (await listWebhookEndpoints(db, auth.projectId)).map(publicEndpoint) });
    },
  };
}
