import cluster from 'node:cluster';
import { loadConfig } from '@tes/config';
import { RELEASE } from '@tes/core';
import { runService } from '@tes/lifecycle';
import { withTracing } from '@tes/tracing';
import { startGatewayCluster } from './cluster';
import { startGateway } from './server';

const running = cluster.isWorker
  ? // one of GATEWAY_PROCESSES under a primary (cluster.ts)
    runService(
      'gateway',
      () => loadConfig(),
      (config, logger) => withTracing(config, { name: 'tes-gateway', version: RELEASE }, () => startGateway(config, logger, { clusterWorker: true })),
    )
  : runService(
      'gateway',
      () => loadConfig(),
      // the primary of a cluster serves no requests: its processes trace theirs
      (config, logger) =>
        config.gatewayProcesses > 1
          ? startGatewayCluster(config, logger)
          : withTracing(config, { name: 'tes-gateway', version: RELEASE }, () => startGateway(config, logger)),
    );
void running.then((code) => process.exit(code));
