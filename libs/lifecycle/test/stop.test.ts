import { createLogger, createNullLogger } from '@tes/observability';
import { CaptureTransport } from '@tes/testing';
import { ShutdownCoordinator, startCleanly, StopOverrun, stopInOrder, type Stoppable } from '../src';

/** A part that records its stop in `log`, after `ms`, failing when told to. */
function part(log: string[], name: string, o: { ms?: number; fails?: boolean; hangs?: boolean } = {}): Stoppable {
  return {
    name,
    stop: async () => {
      if (o.hangs) return new Promise<void>(() => undefined);
      if (o.ms) await new Promise((r) => setTimeout(r, o.ms));
      log.push(name);
      if (o.fails) throw new Error(`${name} refused to stop`);
    },
  };
}

describe('stopInOrder', () => {
  it('stops the parts one after another in the order given', async () => {
    const log: string[] = [];
    // the first part is the slowest: a concurrent stop would finish it last
    const clean = await stopInOrder([part(log, 'http', { ms: 60 }), part(log, 'amqp', { ms: 10 }), part(log, 'db')], 5_000, () => undefined);
    expect(clean).toBe(true);
    expect(log).toEqual(['http', 'amqp', 'db']);
  });

  it('a part that fails is reported and the next parts are stopped all the same', async () => {
    const log: string[] = [];
    const failed: string[] = [];
    const clean = await stopInOrder([part(log, 'http'), part(log, 'amqp', { fails: true }), part(log, 'db')], 5_000, (name, err) =>
      failed.push(`${name}: ${(err as Error).message}`),
    );
    expect(clean).toBe(false);
    expect(log).toEqual(['http', 'amqp', 'db']);
    expect(failed).toEqual(['amqp: amqp refused to stop']);
  });

  it('a part that hangs is given up at the deadline; the parts after it still get their 100 ms', async () => {
    const log: string[] = [];
    const failed: string[] = [];
    const overruns: string[] = [];
    const started = Date.now();
    const clean = await stopInOrder([part(log, 'consumers', { hangs: true }), part(log, 'db', { ms: 50 })], 300, (name, err) => {
      failed.push(`${name}: ${(err as Error).message}`);
      // an overrun is told apart from a part that threw: the test stack fails on an overrun only
      if (err instanceof StopOverrun) overruns.push(err.part);
    });
    const took = Date.now() - started;
    expect(clean).toBe(false);
    expect(failed).toEqual(['consumers: timed out after 300 ms']);
    expect(overruns).toEqual(['consumers']);
    // the pool still closed, though the deadline had passed when its turn came
    expect(log).toEqual(['db']);
    expect(took).toBeGreaterThanOrEqual(300);
    expect(took).toBeLessThan(1_000);
  });
});

describe('ShutdownCoordinator', () => {
  it('stops each part once however often it is asked, and logs the begin and the end', async () => {
    const log: string[] = [];
    const logs = new CaptureTransport();
    const coordinator = new ShutdownCoordinator(createLogger({ service: 'test', transports: [logs] }), 5_000);
    coordinator.add(part(log, 'http', { ms: 20 }));
    coordinator.add(part(log, 'db'));
    const first = coordinator.shutdown('SIGTERM');
    const second = coordinator.shutdown('SIGINT');
    expect(second).toBe(first);
    expect(await first).toBe(0);
    expect(await coordinator.shutdown('again')).toBe(0);
    expect(log).toEqual(['http', 'db']);
    expect(logs.records.map((r) => r.message)).toEqual(['process.shutdown.begin', 'process.shutdown.done']);
    expect(logs.records[0]).toMatchObject({ reason: 'SIGTERM', deadlineMs: 5_000 });
  });

  it('resolves to 1 when a part fails or overruns the deadline, after stopping the rest', async () => {
    const log: string[] = [];
    const logs = new CaptureTransport();
    const coordinator = new ShutdownCoordinator(createLogger({ service: 'test', transports: [logs] }), 200);
    coordinator.add(part(log, 'http', { fails: true }));
    coordinator.add(part(log, 'consumers', { hangs: true }));
    coordinator.add(part(log, 'db'));
    expect(await coordinator.shutdown('SIGTERM')).toBe(1);
    expect(log).toEqual(['http', 'db']);
    const failures = logs.records.filter((r) => r.message === 'process.shutdown.part_failed').map((r) => r.part);
    expect(failures).toEqual(['http', 'consumers']);
    expect(logs.records.at(-1)).toMatchObject({ message: 'process.shutdown.done', code: 1 });
  });

  it('signal handlers can be removed again', () => {
    const before = process.listenerCount('SIGTERM');
    const remove = new ShutdownCoordinator(createNullLogger(), 1_000).installSignalHandlers(() => undefined);
    expect(process.listenerCount('SIGTERM')).toBe(before + 1);
    remove();
    expect(process.listenerCount('SIGTERM')).toBe(before);
  });
});

describe('startCleanly', () => {
  it('a start that fails part-way stops what it started, newest first, and rethrows its own error', async () => {
    const log: string[] = [];
    const logs = new CaptureTransport();
    const failure = new Error('broker unreachable');
    const run = startCleanly(
      async (started) => {
        started.add('db', () => void log.push('db'));
        started.add('storage', async () => {
          log.push('storage');
          throw new Error('already closed');
        });
        started.add('amqp', () => void log.push('amqp'));
        throw failure;
      },
      { logger: createLogger({ service: 'test', transports: [logs] }) },
    );
    await expect(run).rejects.toBe(failure);
    expect(log).toEqual(['amqp', 'storage', 'db']);
    // a part that fails to stop is logged, and does not hide the start's own error
    expect(logs.records).toEqual([expect.objectContaining({ message: 'process.start.cleanup_failed', part: 'storage' })]);
  });

  it('a start that succeeds stops nothing and returns what it built', async () => {
    const log: string[] = [];
    const running = await startCleanly(async (started) => {
      started.add('db', () => void log.push('db'));
      return { port: 8080 };
    });
    expect(running).toEqual({ port: 8080 });
    expect(log).toEqual([]);
  });

  it('a cleanup that hangs is given up at the deadline, and the error still comes back', async () => {
    const log: string[] = [];
    const started = Date.now();
    const run = startCleanly(
      async (s) => {
        s.add('db', () => void log.push('db'));
        s.add('consumers', () => new Promise<void>(() => undefined));
        throw new Error('health port in use');
      },
      { deadlineMs: 200 },
    );
    await expect(run).rejects.toThrow('health port in use');
    expect(log).toEqual(['db']);
    expect(Date.now() - started).toBeLessThan(1_500);
  });
});
