import { loadConfig } from '@tes/config';
import { runService } from '@tes/lifecycle';
import { withTracing } from '@tes/tracing';
import { startWorker } from './server';

void runService(
  'worker',
  () => loadConfig(),
  (config, logger) => withTracing(config, 'tes-worker', () => startWorker(config, logger)),
).then((code) => process.exit(code));
