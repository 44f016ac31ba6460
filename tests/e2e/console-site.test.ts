import { useStack } from '../stack';

/**
 * GET /console without a browser (tests/browser drives it in Chromium): the gateway mounts the
 * built console (`npm run build` makes clients/console/dist) with its strict policy, an
 * uncacheable page, immutable hashed assets, and the API's envelope for everything else.
 */
const stack = useStack({ worker: false, relay: false, audit: false });

describe('the console site', () => {
  it('serves the page with a strict CSP, never cached, and its hashed assets immutable', async () => {
    const res = await fetch(`${stack.baseUrl}/console`);
    const html = await res.text();
    expect([res.status, res.headers.get('content-type'), res.headers.get('cache-control')]).toEqual([200, 'text/html; charset=utf-8', 'no-store']);
    const objectStore = new URL(stack.config.s3.publicEndpoint).origin;
    expect(res.headers.get('content-security-policy')!.split('; ')).toEqual([
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self'",
      `img-src 'self' blob: ${objectStore}`,
      `media-src 'self' blob: ${objectStore}`,
      `connect-src 'self' ${objectStore}`,
      "base-uri 'none'",
      "form-action 'self'",
      "frame-ancestors 'none'",
    ]);
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    // nothing inline for the policy to refuse: every script has a src, no style attribute or element
    expect(html.match(/<script\b[^>]*>/g)?.every((tag) => /\bsrc=/.test(tag))).toBe(true);
    expect(html).not.toMatch(/\sstyle=|<style\b|\son[a-z]+=/i);

    const script = /<script\b[^>]*\bsrc="([^"]+)"/.exec(html)![1]!;
    expect(script).toMatch(/^\/console\/assets\/[\w-]+\.js$/);
    const asset = await fetch(`${stack.baseUrl}${script}`);
    expect([asset.status, asset.headers.get('cache-control')]).toEqual([200, 'public, max-age=31536000, immutable']);
    expect(asset.headers.get('content-type')).toMatch(/^(text|application)\/javascript/);
  });

  it('answers anything else under /console in the envelope, uncacheable', async () => {
    const post = await fetch(`${stack.baseUrl}/console`, { method: 'POST' });
    expect([post.status, post.headers.get('allow'), post.headers.get('cache-control'), ((await post.json()) as any).error.message]).toEqual([
      405,
      'GET, HEAD',
      'no-store',
      'method_not_allowed',
    ]);
    for (const missing of ['/console/assets/nope.js', '/console/assets/..%2f..%2fpackage.json', '/console/index.html', '/console/favicon.ico']) {
      const res = await fetch(`${stack.baseUrl}${missing}`);
      expect([missing, res.status, res.headers.get('cache-control'), ((await res.json()) as any).error.message]).toEqual([
        missing,
        404,
        'no-store',
        'route_not_found',
      ]);
    }
  });
});
