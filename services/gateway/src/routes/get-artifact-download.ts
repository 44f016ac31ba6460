import { AppError, isId } from '@tes/core';
import { getArtifact } from '@tes/db';
import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';
import { ownExecution } from './own-execution';

/** A short-lived download URL for one artifact of an execution of the caller's project. */
export function getArtifactDownloadRoute({ db, store, config, logger }: GatewayDeps): KeyRoute {
  return {
    method: 'get',
    path: '/tools/executions/{id}/artifacts/{artifactId}/download',
    operationId: 'getArtifactDownload',
    scope: 'executions:read',
    body: 'none',
    handle: async ({ req, res, auth }) => {
      const e = await ownExecution(db, auth.projectId, req.params.id as string);
      const artifactId = req.params.artifactId as string;
      const a = isId('art', artifactId) ? await getArtifact(db, e.projectId, e.id, artifactId) : null;
      if (!a) throw new AppError('artifact_not_found');
      // expired by the database's clock (the janitor's), not by this process's
      if (a.deletedAt || a.msLeft <= 0) throw new AppError('artifact_expired');
      // A URL must not outlive its artifact: past expiresAt the API says artifact_expired, but
      // the object stays until the janitor's next sweep, and an older URL would still serve it.
      // Under a second left: expired already. The time left is the database's, carried over
      // to this process's clock, which the signer reads.
      const presigned = await store.presignGet({
        key: a.storageKey,
        maxSeconds: Math.min(config.presignTtlSeconds, 300),
        notAfter: new Date(Date.now() + a.msLeft),
        contentType: a.mimeType,
        fileName: a.fileName,
      });
      if (!presigned) throw new AppError('artifact_expired');
      logger.info('gateway.artifact.presigned', {
        requestId: res.locals.requestId as string,
        executionId: e.id,
        artifactId: a.id,
        ttlSeconds: presigned.ttlSeconds,
      });
      res.json({
        data: {
          url: presigned.url,
          expiresAt: presigned.expiresAt.toISOString(),
          mimeType: a.mimeType,
          sizeBytes: a.sizeBytes,
          sha256: a.sha256,
        },
      });
    },
  };
}
