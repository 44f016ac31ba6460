import amqp from 'amqplib';
import { DevError, redactUrl } from './output';

const UNREACHABLE = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET']);

/**
 * Opens and closes one AMQP connection, before any service starts: without a broker every
 * service would retry for 30 s and then exit with a less helpful message. A full AMQP
 * handshake (not just TCP) also catches a wrong user, password or vhost.
 */
export async function checkRabbitMq(urls: string[]): Promise<string> {
  // a cluster's nodes (AMQP_URL comma-separated): one that answers is enough, as for the services
  let failure: unknown;
  for (const url of urls) {
    try {
      await checkOne(url);
      return url;
    } catch (err) {
      failure = err;
    }
  }
  throw failure;
}

async function checkOne(url: string): Promise<void> {
  let conn: amqp.ChannelModel;
  try {
    conn = await amqp.connect(url, { timeout: 5_000, clientProperties: { connection_name: 'tes-dev-check' } });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const where = redactUrl(url);
    if ((e.code && UNREACHABLE.has(e.code)) || /timeout/i.test(e.message)) {
      throw new DevError(
        [
          `RabbitMQ is not reachable at ${where} (${e.code ?? e.message}).`,
          '  Start it with:   rabbitmq-server -detached      (it needs about 6 s to accept connections)',
          '  or point AMQP_URL at a running broker, e.g. AMQP_URL=amqp://user:pass@host:5672',
        ].join('\n'),
      );
    }
    throw new DevError(`RabbitMQ at ${where} refused the connection: ${e.message}\n  Check the user, password and vhost in AMQP_URL.`);
  }
  await conn.close().catch(() => undefined);
}
