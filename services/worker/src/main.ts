import { loadConfig } from '@tes/config';
import { runService } from '@tes/lifecycle';
import { startWorker } from './server';

void runService(
  'worker',
  () => loadConfig(),
  (config, logger) => startWorker(config, logger),
).then((code) => process.exit(code));
