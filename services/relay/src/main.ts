import { loadConfig } from '@tes/config';
import { runService } from '@tes/lifecycle';
import { startRelay } from './server';

void runService(
  'relay',
  () => loadConfig(),
  (config, logger) => startRelay(config, logger),
).then((code) => process.exit(code));
