import { Router, type Response } from 'express';
import { AppError, isExecutionStatus, isId, type ExecutionStatus } from '@tes/core';
import { cancelExecution, getArtifact, getExecution, getExecutionWithSteps, getSteps, listExecutions, type ExecutionRecord } from '@tes/db';
import { authOf, requireScope } from '../auth';
import type { GatewayDeps } from '../context';
import { publicExecution } from '../serialize';
import { compileCheck } from '../validation';

interface ListQuery {
  limit?: string;
  before?: string;
  status?: string;
  tool?: string;
}

const checkListQuery = compileCheck<ListQuery>({
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'string', pattern: '^(100|[1-9][0-9]?)$' },
    before: { type: 'string', pattern: '^exe_[0-9A-HJKMNP-TV-Z]{26}$' },
    status: { type: 'string', minLength: 1, maxLength: 32 },
    tool: { type: 'string', minLength: 1, maxLength: 100 },
  },
});

export function executionRoutes(deps: GatewayDeps): Router {
  const router = Router();
  const { db } = deps;

  /** Reads an execution of the caller's project; any other id is the same 404. */
  async function load(res: Response, id: string): Promise<ExecutionRecord> {
    const auth = authOf(res);
    const e = isId('exe', id) ? await getExecution(db, auth.projectId, id) : null;
    if (!e) throw new AppError('execution_not_found');
    return e;
  }

  router.get('/tools/executions', requireScope('executions:read'), async (req, res) => {
    const auth = authOf(res);
    const q = checkListQuery({ ...(req.query as Record<string, unknown>) });
    let status: ExecutionStatus | undefined;
    if (q.status !== undefined) {
      if (!isExecutionStatus(q.status)) throw new AppError('invalid_request', 'invalid_request', { details: { parameter: 'status' } });
      status = q.status;
    }
    const limit = q.limit ? Number(q.limit) : 20;
    const { items, hasMore } = await listExecutions(db, { projectId: auth.projectId, limit, before: q.before, status, tool: q.tool });
    const steps = await getSteps(db, auth.projectId, items.map((e) => e.id));
    res.json({
      data: items.map((e) => publicExecution(e, steps)),
      hasMore,
      nextBefore: hasMore ? (items[items.length - 1]?.id ?? null) : null,
    });
  });

  router.get('/tools/executions/:id', requireScope('executions:read'), async (req, res) => {
    const id = req.params.id as string;
    const found = isId('exe', id) ? await getExecutionWithSteps(db, authOf(res).projectId, id) : null;
    if (!found) throw new AppError('execution_not_found');
    res.json({ data: publicExecution(found.execution, found.steps) });
  });

  router.post('/tools/executions/:id/cancel', requireScope('tools:execute'), async (req, res) => {
    const auth = authOf(res);
    const e = await load(res, req.params.id as string);
    if (e.apiKeyId !== auth.keyId && auth.role !== 'ADMIN') throw new AppError('execution_cancel_not_allowed');
    const outcome = await cancelExecution(db, auth.projectId, e);
    if (outcome.kind === 'not_cancellable') {
      throw new AppError('execution_not_cancellable', 'execution_not_cancellable', { details: { status: outcome.execution.status } });
    }
    if (outcome.kind === 'cancelled') deps.metrics.executionsTotal.inc({ tool: e.tool, status: 'cancelled' });
    deps.logger.info('gateway.execution.cancel', { requestId: res.locals.requestId, executionId: e.id, projectId: e.projectId, outcome: outcome.kind });
    const steps = await getSteps(db, e.projectId, [e.id]);
    res.status(outcome.kind === 'requested' ? 202 : 200).json({ data: publicExecution(outcome.execution, steps) });
  });

  router.get('/tools/executions/:id/artifacts/:artifactId/download', requireScope('executions:read'), async (req, res) => {
    const e = await load(res, req.params.id as string);
    const artifactId = req.params.artifactId as string;
    const a = isId('art', artifactId) ? await getArtifact(db, e.projectId, e.id, artifactId) : null;
    if (!a) throw new AppError('artifact_not_found');
    if (a.deletedAt || a.expiresAt.getTime() <= Date.now()) throw new AppError('artifact_expired');
    // A URL must not outlive its artifact: past expiresAt the API says artifact_expired, but
    // the object stays until the janitor's next sweep, and an older URL would still serve it.
    // Under a second left: expired already.
    const presigned = await deps.store.presignGet({
      key: a.storageKey,
      maxSeconds: Math.min(deps.config.presignTtlSeconds, 300),
      notAfter: a.expiresAt,
      contentType: a.mimeType,
      fileName: a.fileName,
    });
    if (!presigned) throw new AppError('artifact_expired');
    deps.logger.info('gateway.artifact.presigned', { requestId: res.locals.requestId, executionId: e.id, artifactId: a.id, ttlSeconds: presigned.ttlSeconds });
    res.json({
      data: {
        url: presigned.url,
        expiresAt: presigned.expiresAt.toISOString(),
        mimeType: a.mimeType,
        sizeBytes: a.sizeBytes,
        sha256: a.sha256,
      },
    });
  });

  return router;
}
