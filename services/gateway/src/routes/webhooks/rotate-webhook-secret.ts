import { AppError, isId } from '@tes/core';
import { rotateWebhookSecret } from '@tes/db';
import type { GatewayDeps } from '../../context';
import type { KeyRoute } from '../../routing/route-spec';
import { publicEndpoint, requireProjectAdmin } from './endpoint-access';

/** Gives an endpoint a new signing secret, in this answer only; the old one stops at once. */
export function rotateWebhookSecretRoute({ db }: GatewayDeps): KeyRoute {
  return {
    method: 'post',
    path: '/tools/webhooks/{id}/rotate-secret',
    operationId: 'rotateWebhookSecret',
    scope: 'project:read',
    body: 'none',
    precheck: (_req, _operation, auth) => requireProjectAdmin(auth),
    handle: async ({ req, res, auth }) => {
      const id = req.params.id as string;
      const e = isId('whk', id) ? await rotateWebhookSecret(db, auth.projectId, id) : null;
      if (!e) throw new AppError('webhook_endpoint_not_found');
      res.json({ data: { ...publicEndpoint(e), secret: e.secret } });
    },
  };
}
