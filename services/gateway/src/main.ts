import cluster from 'node:cluster';
import { loadConfig } from '@tes/config';
import { runService } from '@tes/observability';
import { startGatewayCluster } from './cluster';
import { startGateway } from './server';

if (cluster.isWorker) {
  // one of GATEWAY_PROCESSES under a primary (cluster.ts)
  void runService('gateway', () => loadConfig(), (config, logger) => startGateway(config, logger, { clusterWorker: true }));
} else {
  void runService('gateway', () => loadConfig(), (config, logger) =>
    config.gatewayProcesses > 1 ? startGatewayCluster(config, logger) : startGateway(config, logger),
  );
}
