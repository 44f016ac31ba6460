import type { PublicExecution } from './public-execution';

/**
 * The webhook event (docs/api.md#webhooks): its one owner. The deliveries' trigger writes one
 * row per subscribed endpoint and event type, the relay builds this body once per delivery and
 * sends it on every attempt, libs/db stores it, and the admin CLI subscribes endpoints by type.
 */

/** The events an endpoint may subscribe to (all of them by default). */
export const WEBHOOK_EVENTS = ['execution.succeeded', 'execution.failed', 'execution.cancelled', 'execution.needs_review'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** The body a webhook carries (Standard Webhooks). */
export interface WebhookEventBody {
  type: WebhookEvent;
  /** When the event happened (RFC 3339); the same on every retry. */
  timestamp: string;
  /** The execution as the statement that caused the event left it. */
  data: PublicExecution;
}
