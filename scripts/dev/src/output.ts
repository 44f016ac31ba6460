/**
 * Everything the launcher prints goes through here: one line per record, each prefixed
 * with who said it ("dev", "gateway", "postgres", ...) so interleaved output stays readable.
 * Children's JSON log lines are forwarded as they are, after the prefix.
 */

const COLORS = [36, 33, 35, 32, 34, 31];
const useColor = process.stdout.isTTY && !process.env.NO_COLOR;
const assigned = new Map<string, number>();
const WIDTH = 8;

// A closed pipe (e.g. `npm start | head`) must not crash the launcher while it still has
// children to stop: drop the output instead.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);

function prefix(source: string): string {
  const label = source.padEnd(WIDTH);
  if (!useColor) return `${label} | `;
  let color = assigned.get(source);
  if (color === undefined) {
    color = COLORS[assigned.size % COLORS.length]!;
    assigned.set(source, color);
  }
  return `\x1b[${color}m${label}\x1b[0m | `;
}

/** Writes each line of `text` with the source's prefix. */
export function line(source: string, text: string, stream: NodeJS.WriteStream = process.stdout): void {
  for (const l of text.replace(/\n+$/, '').split('\n')) stream.write(`${prefix(source)}${l}\n`);
}

export const say = {
  info: (text: string): void => line('dev', text),
  warn: (text: string): void => line('dev', `warning: ${text}`, process.stderr),
  error: (text: string): void => line('dev', `error: ${text}`, process.stderr),
  /** Unprefixed output, for the copy-paste example. */
  raw: (text: string): void => void process.stdout.write(text.endsWith('\n') ? text : `${text}\n`),
};

/** An expected failure with a message for the developer: printed without a stack trace. */
export class DevError extends Error {
  override name = 'DevError';
}

/** Hides the password of a URL before it is printed. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}
