import { randomBytes } from 'node:crypto';
import { AppError, canonicalJson } from '@tes/core';
import { GuardedHttp, webhookHeaders } from '@tes/outbound';
import type { GatewayDeps } from '../../context';
import type { KeyRoute } from '../../routing/route-spec';
import { ownEndpoint, requireProjectAdmin } from './endpoint-access';

/** Test sends one project may have open in this process at once. */
const TESTS_PER_PROJECT = 2;

/**
 * Sends one signed `webhook.test` event to an endpoint now and answers with what the receiver
 * said, so a caller sees at once whether its receiver is reachable and verifies our signature.
 *
 * Sent from the gateway, not queued to the relay: the answer is the point, and a test event
 * belongs to no execution (a delivery row names one). Nothing is recorded or retried. The send
 * goes through the same outbound guard as deliveries (GuardedHttp: every resolved address is
 * checked at connect, unless WEBHOOK_ALLOW_PRIVATE), has the relay's whole-attempt deadline
 * (WEBHOOK_TIMEOUT_MS), reads at most 64 KiB of the answer, and a project has at most
 * TESTS_PER_PROJECT open here, so slow receivers hold few of the gateway's sockets.
 */
export function testWebhookRoute({ db, config, logger }: GatewayDeps): KeyRoute {
  // stateless (its one option is config): built here rather than passed down from server.ts
  const http = new GuardedHttp({ allowPrivateNetworks: config.webhookAllowPrivate });
  const open = new Map<string, number>();
  return {
    method: 'post',
    path: '/tools/webhooks/{id}/test',
    operationId: 'testWebhookEndpoint',
    scope: 'project:read',
    body: 'none',
    precheck: (_req, _operation, auth) => requireProjectAdmin(auth),
    handle: async ({ req, res, auth }) => {
      const e = await ownEndpoint(db, auth.projectId, req.params.id as string);
      const n = open.get(auth.projectId) ?? 0;
      if (n >= TESTS_PER_PROJECT) {
        // the contract's 429 for the request rate carries Retry-After: the open tests end within their deadline
        res.setHeader('Retry-After', String(Math.max(1, Math.ceil(config.webhookTimeoutMs / 1000))));
        throw new AppError('rate_limit_exceeded', 'rate_limit_exceeded', {
          details: { reason: 'webhook tests already in flight for this project', limit: TESTS_PER_PROJECT },
        });
      }
      open.set(auth.projectId, n + 1);
      const webhookId = `msg_${randomBytes(16).toString('hex')}`;
      const body = canonicalJson({ type: 'webhook.test', timestamp: new Date().toISOString(), data: { endpointId: e.id, projectId: auth.projectId } });
      const started = Date.now();
      let statusCode: number | null = null;
      let error: string | null = null;
      try {
        const answer = await http.request(
          'POST',
          e.url,
          {
            headers: webhookHeaders(e.secret, webhookId, body),
            body,
            signal: AbortSignal.timeout(config.webhookTimeoutMs + 1_000),
            deadlineMs: config.webhookTimeoutMs,
            timeoutMs: config.webhookTimeoutMs,
            maxBytes: 64 * 1024,
          },
          0,
        );
        statusCode = answer.status;
        if (answer.status < 200 || answer.status >= 300) error = `HTTP ${answer.status}`;
      } catch (err) {
        error = (err as Error).message.slice(0, 300);
      } finally {
        const left = (open.get(auth.projectId) ?? 1) - 1;
        if (left <= 0) open.delete(auth.projectId);
        else open.set(auth.projectId, left);
      }
      logger.info('gateway.webhook.test', {
        requestId: res.locals.requestId as string,
        endpointId: e.id,
        projectId: auth.projectId,
        statusCode,
        delivered: error === null,
      });
      res.json({ data: { webhookId, delivered: error === null, statusCode, error, durationMs: Date.now() - started } });
    },
  };
}
