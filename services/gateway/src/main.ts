import cluster from 'node:cluster';
import { loadConfig } from '@tes/config';
import { runService } from '@tes/lifecycle';
import { startGatewayCluster } from './cluster';
import { startGateway } from './server';

const running = cluster.isWorker
  ? // one of GATEWAY_PROCESSES under a primary (cluster.ts)
    runService(
      'gateway',
      () => loadConfig(),
      (config, logger) => startGateway(config, logger, { clusterWorker: true }),
    )
  : runService(
      'gateway',
      () => loadConfig(),
      (config, logger) => (config.gatewayProcesses > 1 ? startGatewayCluster(config, logger) : startGateway(config, logger)),
    );
void running.then((code) => process.exit(code));
