import { AppError } from '@tes/core';
import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';

/**
 * One tool's catalog entry, exactly as GET /tools lists it, under the same scope. Matched like
 * POST /tools/{tool}: a path a literal GET route lacks reaches it (GET /tools/quote reads the
 * tool "quote", which does not exist: 404 tool_not_found).
 */
export function getToolRoute({ catalog, settings }: GatewayDeps): KeyRoute {
  return {
    method: 'get',
    path: '/tools/{tool}',
    operationId: 'getTool',
    scope: 'tools:read',
    body: 'none',
    handle: async ({ req, res }) => {
      const name = req.params.tool as string;
      const s = await settings.get();
      const entry = catalog.describeOne(name, s.prices, s.unavailable, s.today);
      if (!entry) throw new AppError('tool_not_found', 'tool_not_found', { details: { tool: name } });
      res.json({ data: entry });
    },
  };
}
