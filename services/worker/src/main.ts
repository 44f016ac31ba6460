import { loadConfig } from '@tes/config';
import { RELEASE } from '@tes/core';
import { runService } from '@tes/lifecycle';
import { withTracing } from '@tes/tracing';
import { startWorker } from './server';

void runService(
  'worker',
  () => loadConfig(),
  (config, logger) => withTracing(config, { name: 'tes-worker', version: RELEASE }, () => startWorker(config, logger)),
).then((code) => process.exit(code));
