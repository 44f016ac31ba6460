import { loadConfig } from '@tes/config';
import { runService } from '@tes/observability';
import { startGateway } from './server';

void runService('gateway', () => loadConfig(), (config, logger) => startGateway(config, logger));
