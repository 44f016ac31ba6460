import { Router } from 'express';
import { AppError } from '@tes/core';
import { getProject, getUsage, monthBounds } from '@tes/db';
import { authOf, requireScope } from '../auth';
import type { GatewayDeps } from '../context';

export function projectRoutes(deps: GatewayDeps): Router {
  const router = Router();
  const { db } = deps;

  router.get('/tools/project', requireScope('project:read'), async (_req, res) => {
    const auth = authOf(res);
    const p = await getProject(db, auth.projectId);
    if (!p) throw new AppError('platform_project_permission_required');
    res.json({
      data: {
        organization: { id: p.organizationId, name: p.organizationName },
        project: { id: p.id, name: p.name },
        key: { id: auth.keyId, name: auth.keyName, scopes: auth.scopes, role: auth.role },
        balance: { availableMicros: p.availableMicros, reservedMicros: p.reservedMicros, currency: 'usd' },
        monthlyCapMicros: p.monthlyCapMicros,
      },
    });
  });

  router.get('/tools/usage', requireScope('usage:read'), async (_req, res) => {
    const auth = authOf(res);
    const now = new Date();
    const [p, usage] = await Promise.all([getProject(db, auth.projectId), getUsage(db, auth.projectId, now)]);
    if (!p) throw new AppError('platform_project_permission_required');
    const { start, end } = monthBounds(now);
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
  });

  return router;
}
