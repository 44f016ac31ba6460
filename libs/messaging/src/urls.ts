/**
 * AMQP_URL may name several nodes of one RabbitMQ cluster, comma-separated
 * (`amqp://u:p@rabbit-0:5672,amqp://u:p@rabbit-1:5672`). The client connects to the first;
 * every later attempt (a failed connect, a reconnect after a lost connection) moves on to the
 * next one, round the list: a node that went away is left for the next in line, and a
 * client that lost its connection does not insist on the node that dropped it.
 *
 * The list is split only before a `scheme://` (amqp://, amqps://), so a comma inside a password needs
 * no escaping (percent-encoding it as %2C works too).
 */
export function parseAmqpUrls(raw: string): string[] {
  return raw
    .split(/,(?=\s*[a-z][a-z0-9+.-]*:\/\/)/i)
    .map((u) => u.trim())
    .filter(Boolean);
}

/** The URL with its password replaced by `***` (for logs and errors). */
function redactAmqpUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'the configured URL';
  }
}

/** `host:port` of a URL (no credentials): which node a log line is about. */
export function amqpNode(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || (u.protocol === 'amqps:' ? 5671 : 5672)}`;
  } catch {
    return 'the configured URL';
  }
}

/** The nodes in turn: next() gives the first URL, then the second, … and the first again. */
export class UrlRotation {
  readonly urls: readonly string[];
  private index = 0;

  constructor(raw: string) {
    this.urls = parseAmqpUrls(raw);
    if (this.urls.length === 0) throw new Error('no AMQP URL given');
  }

  next(): string {
    const url = this.urls[this.index % this.urls.length]!;
    this.index = (this.index + 1) % this.urls.length;
    return url;
  }

  /** Every URL, passwords redacted, comma-separated. */
  describe(): string {
    return this.urls.map(redactAmqpUrl).join(',');
  }
}
