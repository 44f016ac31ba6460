import { verifyWebhook, WebhookVerificationError } from '../src';

/**
 * Vectors computed with Python's hmac module, not with any code of ours; the first is the
 * example of the Standard Webhooks specification itself.
 */
const VECTORS = [
  {
    secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    timestamp: 1614265330,
    body: '{"test": 2432232314}',
    signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  },
  {
    secret: 'whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYX',
    id: 'msg_0123456789abcdef0123456789abcdef',
    timestamp: 1795000000,
    body: '{"data":{"id":"exe_01ARZ3NDEKTSV4RRFFQ69G5FAV","status":"succeeded"},"timestamp":"2026-11-23T12:00:00.000Z","type":"execution.succeeded"}',
    signature: 'v1,/HI4eLCZYbqzRgDMiO64VRvFU6racq3F7QFKRbW8PJY=',
  },
];

const at = (seconds: number) => () => new Date(seconds * 1000);
const headers = (v: (typeof VECTORS)[number], signature = v.signature) => ({
  'webhook-id': v.id,
  'webhook-timestamp': String(v.timestamp),
  'webhook-signature': signature,
});

it.each(VECTORS)('verifies the independently computed signature of $id', (v) => {
  expect(verifyWebhook(v.secret, headers(v), v.body, { now: at(v.timestamp + 10) })).toEqual(JSON.parse(v.body));
  // the body as bytes, Fetch Headers, and a second (rotated-out) signature in the header
  const h = new Headers(headers(v, `v1,bm90IHRoaXMgb25l ${v.signature}`));
  expect(verifyWebhook(v.secret, h, Buffer.from(v.body), { now: at(v.timestamp) })).toEqual(JSON.parse(v.body));
});

it('refuses a changed body, another secret, an old or future timestamp, and missing headers', () => {
  const v = VECTORS[1]!;
  const now = { now: at(v.timestamp) };
  const refuse = (f: () => unknown, message: RegExp) => {
    expect(f).toThrow(WebhookVerificationError);
    expect(f).toThrow(message);
  };
  refuse(() => verifyWebhook(v.secret, headers(v), v.body.replace('succeeded', 'failed'), now), /no signature matches/);
  refuse(() => verifyWebhook(VECTORS[0]!.secret, headers(v), v.body, now), /no signature matches/);
  refuse(() => verifyWebhook(v.secret, headers(v, v.signature.replace('v1,', 'v2,')), v.body, now), /no signature matches/);
  refuse(() => verifyWebhook(v.secret, headers(v), v.body, { now: at(v.timestamp + 301) }), /too far/);
  refuse(() => verifyWebhook(v.secret, headers(v), v.body, { now: at(v.timestamp - 301) }), /too far/);
  refuse(() => verifyWebhook(v.secret, { 'webhook-id': v.id }, v.body, now), /missing/);
  refuse(() => verifyWebhook(v.secret.slice(6), headers(v), v.body, now), /whsec_/);
});
