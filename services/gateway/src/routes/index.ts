import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';
import { cancelExecutionRoute } from './cancel-execution';
import { createQuoteRoute } from './create-quote';
import { getArtifactDownloadRoute } from './get-artifact-download';
import { getExecutionRoute } from './get-execution';
import { getProjectRoute } from './get-project';
import { getToolRoute } from './get-tool';
import { getUsageRoute } from './get-usage';
import { listExecutionsRoute } from './list-executions';
import { listToolsRoute } from './list-tools';
import { submitExecutionRoute } from './submit-execution';
import { uploadFileRoute } from './upload-file';
import { streamExecutionEventsRoute } from '../push/events-route';
import { webhookRoutes } from './webhooks';

export { docsAssets, docsRoutes } from './docs';

/** Every keyed endpoint, one file each; mountRoutes orders them (the order here decides nothing). */
export function apiRoutes(deps: GatewayDeps): KeyRoute[] {
  return [
    getProjectRoute(deps),
    getUsageRoute(deps),
    listToolsRoute(deps),
    getToolRoute(deps),
    createQuoteRoute(deps),
    uploadFileRoute(deps),
    submitExecutionRoute(deps),
    listExecutionsRoute(deps),
    getExecutionRoute(deps),
    streamExecutionEventsRoute(deps),
    cancelExecutionRoute(deps),
    getArtifactDownloadRoute(deps),
    ...webhookRoutes(deps),
  ];
}
