import { AppError } from '@tes/core';
import { getProject } from '@tes/db';
import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';

/** The calling key's organization, project, key, balance and monthly cap. */
export function getProjectRoute({ db }: GatewayDeps): KeyRoute {
  return {
    method: 'get',
    path: '/tools/project',
    operationId: 'getProject',
    scope: 'project:read',
    body: 'none',
    handle: async ({ res, auth }) => {
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
    },
  };
}
