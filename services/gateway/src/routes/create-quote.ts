import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';
import { quoteInput } from './input-files';

/** components.schemas.QuoteRequest */
export interface QuoteBody {
  tool: string;
  arguments: Record<string, unknown>;
}

/** A free quote: the most a submit of this input would reserve, at the current prices, priced on its files' facts. */
export function createQuoteRoute({ catalog, settings, db }: GatewayDeps): KeyRoute<QuoteBody> {
  return {
    method: 'post',
    path: '/tools/quote',
    operationId: 'createQuote',
    scope: 'tools:read',
    body: 'json',
    handle: async ({ res, auth, body }) => {
      const s = await settings.get();
      const input = catalog.resolve(body.tool, body.arguments, s.unavailable, s.today);
      res.json({ data: await quoteInput({ catalog, db }, auth.projectId, input, s) });
    },
  };
}
