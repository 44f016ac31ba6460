import { loadConfig } from '@tes/config';
import { runService } from '@tes/observability';
import { startRelay } from './server';

void runService('relay', () => loadConfig(), (config, logger) => startRelay(config, logger));
