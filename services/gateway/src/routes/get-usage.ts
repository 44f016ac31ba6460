import { AppError } from '@tes/core';
import { getProject, getUsage } from '@tes/db';
import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';

/** This month's requests, executions and charges of the calling key's project, and what its cap leaves. */
export function getUsageRoute({ db }: GatewayDeps): KeyRoute {
  return {
    method: 'get',
    path: '/tools/usage',
    operationId: 'getUsage',
    scope: 'usage:read',
    body: 'none',
    handle: async ({ res, auth }) => {
      // the month is the database's (tes_month()), as for the counters and the cap
      const [p, usage] = await Promise.all([getProject(db, auth.projectId), getUsage(db, auth.projectId)]);
      if (!p) throw new AppError('platform_project_permission_required');
      const { start, end } = usage.period;
      const remaining = p.monthlyCapMicros === null ? null : Math.max(0, p.monthlyCapMicros - p.monthChargedMicros - p.reservedMicros);
      res.json({
        data: {
          period: { start: start.toISOString(), end: end.toISOString() },
          requestCount: usage.requestCount,
          executionCount: usage.executionCount,
          chargedMicros: usage.chargedMicros,
          reservedMicros: p.reservedMicros,
          currency: 'usd',
          monthlyCapMicros: p.monthlyCapMicros,
          remainingCapMicros: remaining,
        },
      });
    },
  };
}
