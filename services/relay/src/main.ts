import { loadConfig } from '@tes/config';
import { runService } from '@tes/lifecycle';
import { withTracing } from '@tes/tracing';
import { startRelay } from './server';

void runService(
  'relay',
  () => loadConfig(),
  (config, logger) => withTracing(config, 'tes-relay', () => startRelay(config, logger)),
).then((code) => process.exit(code));
