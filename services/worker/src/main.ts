import { loadConfig } from '@tes/config';
import { runService } from '@tes/observability';
import { startWorker } from './server';

void runService('worker', () => loadConfig(), (config, logger) => startWorker(config, logger));
