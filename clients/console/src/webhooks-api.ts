import type { components } from '@tes/client';
import type { Api } from './api';

type Schemas = components['schemas'];
export type WebhookEndpoint = Schemas['WebhookEndpoint'];
export type WebhookEndpointWithSecret = Schemas['WebhookEndpointWithSecret'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type WebhookTestResult = Schemas['WebhookTestResult'];
export type WebhookEventType = Schemas['WebhookEventType'];

export const WEBHOOK_EVENT_TYPES: readonly WebhookEventType[] = ['execution.succeeded', 'execution.failed', 'execution.cancelled', 'execution.needs_review'];

const path = (id: string, rest = '') => `/tools/webhooks/${encodeURIComponent(id)}${rest}`;

/** The project's webhook endpoints (issue #29), through the page's Api: same origin, the key in the header only. */
export const webhooks = {
  async list(api: Api): Promise<WebhookEndpoint[]> {
    return (await api.call<{ data: WebhookEndpoint[] }>('GET', '/tools/webhooks')).body.data;
  },
  async create(api: Api, url: string, events: readonly WebhookEventType[]): Promise<WebhookEndpointWithSecret> {
    return (await api.call<{ data: WebhookEndpointWithSecret }>('POST', '/tools/webhooks', { body: { url, events } })).body.data;
  },
  async remove(api: Api, id: string): Promise<void> {
    await api.call('DELETE', path(id));
  },
  async rotate(api: Api, id: string): Promise<WebhookEndpointWithSecret> {
    return (await api.call<{ data: WebhookEndpointWithSecret }>('POST', path(id, '/rotate-secret'))).body.data;
  },
  async test(api: Api, id: string): Promise<WebhookTestResult> {
    return (await api.call<{ data: WebhookTestResult }>('POST', path(id, '/test'))).body.data;
  },
  async deliveries(api: Api, id: string): Promise<WebhookDelivery[]> {
    return (await api.call<{ data: WebhookDelivery[] }>('GET', path(id, '/deliveries?limit=20'))).body.data;
  },
};
