import { AppError } from '@tes/core';
import { createWebhookEndpoint, listWebhookEndpoints, type WebhookEvent } from '@tes/db';
import type { GatewayDeps } from '../../context';
import type { KeyRoute } from '../../routing/route-spec';
import { acceptableUrl, publicEndpoint, requireProjectAdmin } from './endpoint-access';

/**
 * Live endpoints one project may have. Every execution that ends writes a delivery per
 * subscribed endpoint, so the count multiplies the relay's work for that project; a few
 * receivers per project is what callers need (a fan-out belongs behind one receiver).
 */
const MAX_ENDPOINTS_PER_PROJECT = 10;

interface CreateBody {
  url: string;
  events?: WebhookEvent[];
}

/** Registers an endpoint for the caller's project; its signing secret is in this answer only. */
export function createWebhookRoute({ db, config }: GatewayDeps): KeyRoute<CreateBody> {
  return {
    method: 'post',
    path: '/tools/webhooks',
    operationId: 'createWebhookEndpoint',
    scope: 'project:read',
    body: 'json',
    precheck: (_req, _operation, auth) => requireProjectAdmin(auth),
    handle: async ({ res, auth, body }) => {
      const url = await acceptableUrl(body.url, config.webhookAllowPrivate);
      // A count, then an insert: two creates at once may pass it together. The bound is a
      // guard against an unbounded fan-out, not an exact quota, so one over is harmless.
      if ((await listWebhookEndpoints(db, auth.projectId)).length >= MAX_ENDPOINTS_PER_PROJECT) {
        throw new AppError('invalid_request', 'invalid_request', {
          details: {
            errors: [
              {
                instancePath: '',
                keyword: 'maxEndpoints',
                message: `a project has at most ${MAX_ENDPOINTS_PER_PROJECT} webhook endpoints; delete one first`,
                params: { limit: MAX_ENDPOINTS_PER_PROJECT },
              },
            ],
          },
        });
      }
      const events = body.events ? [...new Set(body.events)] : undefined;
      const e = await createWebhookEndpoint(db, { projectId: auth.projectId, url, ...(events ? { events } : {}) });
      res.status(201).json({ data: { ...publicEndpoint(e), secret: e.secret } });
    },
  };
}
