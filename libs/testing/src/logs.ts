import Transport from 'winston-transport';

/** A winston transport that keeps every formatted record, so tests can inspect logs. */
export class CaptureTransport extends Transport {
  readonly lines: string[] = [];
  readonly records: Record<string, unknown>[] = [];

  override log(info: Record<string | symbol, unknown>, next: () => void): void {
    const formatted = info[Symbol.for('message')];
    this.lines.push(typeof formatted === 'string' ? formatted : JSON.stringify(info));
    this.records.push({ ...info });
    next();
  }

  text(): string {
    return this.lines.join('\n');
  }
}
