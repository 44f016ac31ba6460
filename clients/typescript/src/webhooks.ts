import { createHmac, timingSafeEqual } from 'node:crypto';

/** A webhook whose signature, timestamp or headers do not check out: answer it 400 and drop it. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

/** The event a webhook carries (Standard Webhooks body). */
export interface WebhookEvent<T = Record<string, unknown>> {
  type: 'execution.succeeded' | 'execution.failed' | 'execution.cancelled' | 'execution.needs_review';
  /** When the event happened (RFC 3339); the same on every retry. */
  timestamp: string;
  /** The execution, exactly as `GET /tools/executions/{id}` shows it. */
  data: T;
}

export interface VerifyWebhookOptions {
  /** Refuse deliveries whose webhook-timestamp is further than this from now (default 300 s: replays). */
  toleranceSeconds?: number;
  now?: () => Date;
}

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

/**
 * Checks a delivery as Standard Webhooks says, before trusting any of it: the HMAC-SHA256 of
 * "<webhook-id>.<webhook-timestamp>.<raw body>" keyed with the secret's base64 part must match
 * one of the signatures in webhook-signature, and the timestamp must be recent. Pass the body
 * exactly as received (a re-serialised object will not verify). Deliveries are at least once:
 * deduplicate on the webhook-id header, which is the same on every retry.
 *
 * ```ts
 * app.post('/hooks', express.raw({ type: 'application/json' }), (req, res) => {
 *   const event = verifyWebhook(process.env.TES_WEBHOOK_SECRET!, req.headers, req.body);
 *   res.sendStatus(204);
 * });
 * ```
 */
export function verifyWebhook<T = Record<string, unknown>>(
  secret: string,
  headers: HeaderSource,
  rawBody: string | Uint8Array,
  options: VerifyWebhookOptions = {},
): WebhookEvent<T> {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError('missing webhook-id, webhook-timestamp or webhook-signature');
  if (!/^\d{1,12}$/.test(timestamp)) throw new WebhookVerificationError('webhook-timestamp is not a Unix time in seconds');
  const now = (options.now?.() ?? new Date()).getTime() / 1000;
  if (Math.abs(now - Number(timestamp)) > (options.toleranceSeconds ?? 300)) throw new WebhookVerificationError('webhook-timestamp is too far from now');
  if (!secret.startsWith('whsec_')) throw new WebhookVerificationError('the secret must be the whsec_… value printed by `webhook create`');
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody);
  const mac = createHmac('sha256', Buffer.from(secret.slice(6), 'base64'));
  mac.update(`${id}.${timestamp}.`);
  mac.update(body);
  const expected = Buffer.from(mac.digest('base64'));
  const matches = signatures.split(' ').some((s) => {
    const [version, value] = s.split(',', 2);
    if (version !== 'v1' || value === undefined) return false;
    const got = Buffer.from(value);
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
  if (!matches) throw new WebhookVerificationError('no signature matches');
  try {
    return JSON.parse(body.toString('utf8')) as WebhookEvent<T>;
  } catch {
    throw new WebhookVerificationError('the body is not JSON');
  }
}

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return Array.isArray(value) ? value[0] : value;
}
