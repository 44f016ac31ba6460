import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';

/** The catalog: tools, their input schemas, availability and current prices. */
export function listToolsRoute({ catalog, settings }: GatewayDeps): KeyRoute {
  return {
    method: 'get',
    path: '/tools',
    operationId: 'listTools',
    scope: 'tools:read',
    body: 'none',
    handle: async ({ res }) => {
      const s = await settings.get();
      res.json({ data: catalog.describe(s.prices, s.priceVersion, s.executionEnabled, s.unavailable, s.today) });
    },
  };
}
