import type { Knex } from 'knex';
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  getExecutionById,
  getProject,
  listWebhookDeliveries,
  listWebhookEndpoints,
  WEBHOOK_EVENTS,
  type WebhookDelivery,
  type WebhookEvent,
} from '@tes/db';
import { BlockedAddressError, checkDestination, endpointUrlProblem } from '@tes/outbound';
import { table } from './format';
import { command, idOption, optional, PreconditionError, required, UsageError, type CommandSpec } from './spec';

/** An http(s) URL without credentials in it (endpointUrlProblem: the API's rule too). */
function endpointUrl(raw: string): string {
  const problem = endpointUrlProblem(raw);
  if (problem !== null) throw new UsageError(`--url ${problem}`);
  return new URL(raw).toString();
}

/**
 * The relay refuses to deliver to loopback, private and other non-public addresses (the
 * outbound guard, unless WEBHOOK_ALLOW_PRIVATE): an endpoint that is, or whose name resolves
 * to, one is refused here by the same rule rather than failing every delivery later.
 */
async function reachable(url: string, allowPrivate: boolean): Promise<void> {
  try {
    await checkDestination(url, allowPrivate);
  } catch (err) {
    if (!(err instanceof BlockedAddressError)) throw err;
    throw new UsageError(
      `--url ${err.host} is ${err.address}, ${err.range}: webhooks are delivered to public addresses only (WEBHOOK_ALLOW_PRIVATE=1 allows private ones, for development)`,
    );
  }
}

function events(raw: string | undefined): WebhookEvent[] | undefined {
  if (raw === undefined) return undefined;
  const list = [
    ...new Set(
      raw
        .split(',')
        .map((e) => e.trim())
        .filter(Boolean),
    ),
  ];
  const unknown = list.filter((e) => !(WEBHOOK_EVENTS as readonly string[]).includes(e));
  if (list.length === 0 || unknown.length > 0) {
    throw new UsageError(`unknown events: ${unknown.join(', ') || '(none given)'}; allowed: ${WEBHOOK_EVENTS.join(', ')}`);
  }
  return list as WebhookEvent[];
}

/** An execution's deliveries as `webhook deliveries` and `execution show` print them. */
export function deliveriesTable(deliveries: readonly WebhookDelivery[]): string {
  return table(deliveries, [
    { header: 'id', value: (d) => d.id },
    { header: 'endpoint', value: (d) => d.endpointId },
    { header: 'event', value: (d) => d.eventType },
    { header: 'status', value: (d) => d.status },
    { header: 'attempts', value: (d) => d.attempts, right: true },
    { header: 'last code', value: (d) => d.lastStatusCode, right: true },
    { header: 'next attempt', value: (d) => d.nextAttemptAt },
    { header: 'last error', value: (d) => d.lastError },
  ]);
}

async function projectExists(db: Knex, projectId: string): Promise<void> {
  if (!(await getProject(db, projectId))) throw new PreconditionError(`project ${projectId} not found`);
}

/** Webhook endpoints per project, and what was delivered to them (issue #13). */
export const WEBHOOK_COMMANDS: CommandSpec[] = [
  {
    name: 'webhook create',
    summary: 'Register a webhook endpoint for a project; its signing secret is printed once.',
    options: {
      project: { description: 'project id (prj_...)', required: true },
      url: { description: 'http(s) URL that receives the events (POST, Standard Webhooks signatures)', required: true },
      events: { description: `comma-separated subset of ${WEBHOOK_EVENTS.join(',')} (default: all)` },
    },
    run: async (db, o, _positionals, _note, settings) => {
      const projectId = idOption(required(o, 'project'), 'prj', '--project');
      const url = endpointUrl(required(o, 'url'));
      await reachable(url, settings.webhookAllowPrivate);
      const subscribed = events(optional(o, 'events'));
      await projectExists(db, projectId);
      const e = await createWebhookEndpoint(db, { projectId, url, ...(subscribed ? { events: subscribed } : {}) });
      return { id: e.id, secret: e.secret, url: e.url, events: e.events };
    },
  },
  command({
    name: 'webhook list',
    summary: "List a project's webhook endpoints (never their secrets).",
    options: { project: { description: 'project id (prj_...)', required: true } },
    run: async (db, o) => {
      const projectId = idOption(required(o, 'project'), 'prj', '--project');
      await projectExists(db, projectId);
      return { data: await listWebhookEndpoints(db, projectId) };
    },
    render: (r) =>
      table(r.data, [
        { header: 'id', value: (e) => e.id },
        { header: 'url', value: (e) => e.url },
        { header: 'events', value: (e) => e.events.join(',') },
        { header: 'created', value: (e) => e.createdAt },
      ]),
  }),
  {
    name: 'webhook delete',
    summary: 'Delete a webhook endpoint: nothing more is sent to it, and its pending deliveries end failed.',
    options: { id: { description: 'endpoint id (whk_...)', required: true } },
    run: async (db, o) => {
      const id = idOption(required(o, 'id'), 'whk', '--id');
      if (!(await deleteWebhookEndpoint(db, id))) throw new PreconditionError(`webhook endpoint ${id} not found`);
      return { id, deleted: true };
    },
  },
  command({
    name: 'webhook deliveries',
    summary: "An execution's webhook deliveries: event, endpoint, status, attempts, last status code, next retry.",
    options: { execution: { description: 'execution id (exe_...)', required: true } },
    run: async (db, o) => {
      const executionId = idOption(required(o, 'execution'), 'exe', '--execution');
      if (!(await getExecutionById(db, executionId))) throw new PreconditionError(`execution ${executionId} not found`);
      return { data: await listWebhookDeliveries(db, executionId) };
    },
    render: (r) => (r.data.length ? deliveriesTable(r.data) : '(no deliveries: no endpoint of the project subscribed to the events it reached)'),
  }),
];
