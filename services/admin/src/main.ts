import { dbTimeoutsFor, loadConfig } from '@tes/config';
import { createDb } from '@tes/db';
import { runCli } from './cli';

async function main(): Promise<void> {
  // `admin ledger export … | head`: the reader went away; stop quietly instead of an EPIPE trace.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  const code = await runCli(
    process.argv.slice(2),
    () => createDb({ url: config.databaseUrl, poolMax: 2, applicationName: 'tes-admin', timeouts: dbTimeoutsFor(config, 'admin') }),
    {
      out: (t) => process.stdout.write(`${t}\n`),
      err: (t) => process.stderr.write(`${t}\n`),
      tty: process.stdout.isTTY,
    },
    {
      webhookAllowPrivate: config.webhookAllowPrivate,
      projectSlotShare: config.projectSlotShare,
      modelRetirements: config.modelRetirements,
      providers: {
        baseUrls: config.providerBaseUrls,
        credentials: { openai: config.providers.openaiApiKey, replicate: config.providers.replicateApiToken, fal: config.providers.falKey },
      },
    },
  );
  process.exitCode = code;
}

void main();
