import type { GatewayDeps } from '../../context';
import type { KeyRoute } from '../../routing/route-spec';
import { createWebhookRoute } from './create-webhook';
import { deleteWebhookRoute } from './delete-webhook';
import { listWebhookDeliveriesRoute } from './list-webhook-deliveries';
import { listWebhooksRoute } from './list-webhooks';
import { rotateWebhookSecretRoute } from './rotate-webhook-secret';
import { testWebhookRoute } from './test-webhook';

/** A project's webhook endpoints, managed with its own ADMIN key (issue #29; endpoint-access.ts has the rule). */
export function webhookRoutes(deps: GatewayDeps): KeyRoute[] {
  return [
    createWebhookRoute(deps),
    listWebhooksRoute(deps),
    deleteWebhookRoute(deps),
    rotateWebhookSecretRoute(deps),
    listWebhookDeliveriesRoute(deps),
    testWebhookRoute(deps),
  ];
}
