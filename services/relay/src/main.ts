import { loadConfig } from '@tes/config';
import { RELEASE } from '@tes/core';
import { runService } from '@tes/lifecycle';
import { withTracing } from '@tes/tracing';
import { startRelay } from './server';

void runService(
  'relay',
  () => loadConfig(),
  (config, logger) => withTracing(config, { name: 'tes-relay', version: RELEASE }, () => startRelay(config, logger)),
).then((code) => process.exit(code));
