/** A long-lived part of a process: a server, a pool, a connection, a loop. */
export interface Stoppable {
  name: string;
  stop: () => Promise<void>;
}

/** A part that did not stop within its share of the deadline (it is left running in the background). */
export class StopOverrun extends Error {
  constructor(
    readonly part: string,
    readonly ms: number,
  ) {
    super(`timed out after ${ms} ms`);
    this.name = 'StopOverrun';
  }
}

/**
 * Stops `parts` one after another, in the order given, all within `deadlineMs`. Each part
 * gets what is left of the deadline but never less than 100 ms: a part late in the list (the
 * database pool) must still be closed, or its sockets keep the process alive past the drain.
 * A part that throws or overruns its share is reported to `onFailed` and left running in the
 * background; the next part is stopped all the same. Resolves true when every part stopped.
 */
export async function stopInOrder(parts: readonly Stoppable[], deadlineMs: number, onFailed: (part: string, err: unknown) => void): Promise<boolean> {
  const deadline = Date.now() + deadlineMs;
  let clean = true;
  for (const part of parts) {
    const left = Math.max(deadline - Date.now(), 100);
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        part.stop(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new StopOverrun(part.name, left)), left);
        }),
      ]);
    } catch (err) {
      clean = false;
      onFailed(part.name, err);
    } finally {
      if (timer) clearTimeout(timer);
    }
  }
  return clean;
}
