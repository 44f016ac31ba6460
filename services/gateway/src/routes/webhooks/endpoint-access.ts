import type { Knex } from 'knex';
import { AppError, isId } from '@tes/core';
import { getWebhookEndpoint, type WebhookEndpoint } from '@tes/db';
import { BlockedAddressError, checkDestination, endpointUrlProblem } from '@tes/outbound';
import type { AuthContext } from '../../context';

/**
 * Who manages a project's webhooks (issue #29): a key of the project with the scope
 * `project:read` (checked by mount-routes from the operation's x-required-scope) and the role
 * ADMIN. Endpoints are project settings, as the project's balance and cap are; the contract's
 * scopes are fixed, so the role is what marks a key allowed to change settings. Reading them
 * needs ADMIN too: an endpoint's URL may carry a token of the receiver's, and its deliveries
 * name every execution of the project, whichever key started it.
 */
export function requireProjectAdmin(auth: AuthContext): void {
  if (auth.role !== 'ADMIN')
    throw new AppError('platform_project_permission_required', 'platform_project_permission_required', { details: { requiredRole: 'ADMIN' } });
}

/** A live endpoint of the caller's project; any other id, well-formed or not, is the same 404. */
export async function ownEndpoint(db: Knex, projectId: string, id: string): Promise<WebhookEndpoint & { secret: string }> {
  const e = isId('whk', id) ? await getWebhookEndpoint(db, projectId, id) : null;
  if (!e) throw new AppError('webhook_endpoint_not_found');
  return e;
}

/** An endpoint as the API shows it: never its secret (only create and rotate return that). */
export function publicEndpoint(e: WebhookEndpoint): { id: string; url: string; events: string[]; createdAt: string } {
  return { id: e.id, url: e.url, events: e.events, createdAt: e.createdAt };
}

/**
 * The URL an endpoint may have, normalised: the admin CLI's rule (endpointUrlProblem), and the
 * relay's outbound rule applied now (checkDestination, unless WEBHOOK_ALLOW_PRIVATE): a
 * loopback, private, link-local (cloud metadata) or otherwise non-public address, or a name
 * that resolves to one, is refused here with the reason, instead of failing every delivery
 * later. Delivery checks again on every connection (DNS changes); this is for a clear answer.
 */
export async function acceptableUrl(raw: string, allowPrivate: boolean): Promise<string> {
  const problem = endpointUrlProblem(raw);
  if (problem !== null) throw urlRefused(`url ${problem}`, {});
  try {
    await checkDestination(raw, allowPrivate);
  } catch (err) {
    if (!(err instanceof BlockedAddressError)) throw err;
    throw urlRefused(`${err.host} is ${err.address} (${err.range}): webhooks are delivered to public addresses only`, {
      host: err.host,
      address: err.address,
      range: err.range,
    });
  }
  return new URL(raw).toString();
}

/** invalid_request in the shape of a schema refusal (details.errors, instancePath /url), so clients show it the same way. */
function urlRefused(message: string, params: Record<string, string>): AppError {
  return new AppError('invalid_request', 'invalid_request', { details: { errors: [{ instancePath: '/url', keyword: 'endpoint', message, params }] } });
}
