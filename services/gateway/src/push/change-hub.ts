import type { Knex } from 'knex';
import { isTerminal } from '@tes/core';
import { EXECUTION_CHANGES_CHANNEL, getExecutionWithSteps, NotificationListener, type ExecutionView } from '@tes/db';
import type { Logger } from '@tes/observability';

type Watcher = (view: ExecutionView) => void;

interface Watched {
  projectId: string;
  watchers: Set<Watcher>;
  /** A read is under way; `again` asks for one more after it (a change landed meanwhile). */
  reading: boolean;
  again: boolean;
}

export interface ChangeHubOptions {
  db: Knex;
  databaseUrl: string;
  logger: Logger;
  /** Every watched execution is read again this often whatever the notifications said (default 15 s). */
  resyncMs?: number;
}

/**
 * Brings an execution's changes to the requests that wait for them (Prefer: wait, the event
 * stream), from whichever process made them: the database triggers notify
 * tes_execution_changes with the execution's id when a change commits, this hub LISTENs on one
 * connection of its own and, for an id someone here watches, reads the execution once and hands
 * the view to every watcher. No waiting request holds a pooled connection.
 *
 * Notifications are lost while the LISTEN connection is down; when it is back every watched
 * execution is read again, and, belt and braces, every `resyncMs`.
 */
export class ChangeHub {
  private readonly watched = new Map<string, Watched>();
  private readonly listener: NotificationListener;
  private readonly resync: NodeJS.Timeout;
  private stopped = false;
  private readonly onStop = new Set<() => void>();

  /** The pool the hub reads with (also for the waiting request's final read). */
  readonly db: Knex;

  constructor(private readonly o: ChangeHubOptions) {
    this.db = o.db;
    this.listener = new NotificationListener({
      url: o.databaseUrl,
      applicationName: 'tes-execution-changes',
      channels: { [EXECUTION_CHANGES_CHANNEL]: (id) => this.changed(id) },
      onListening: (listening) => {
        if (listening) this.readAll();
        else o.logger.warn('gateway.push.listen_lost', { watched: this.watched.size });
      },
      onError: (err) => o.logger.warn('gateway.push.listen_error', { err: err.message }),
    });
    this.resync = setInterval(() => this.readAll(), o.resyncMs ?? 15_000);
    this.resync.unref();
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  /** Calls `watcher` with the execution's view after each change; returns the unsubscribe. */
  watch(projectId: string, id: string, watcher: Watcher): () => void {
    let w = this.watched.get(id);
    if (!w) {
      w = { projectId, watchers: new Set(), reading: false, again: false };
      this.watched.set(id, w);
    }
    w.watchers.add(watcher);
    return () => {
      const current = this.watched.get(id);
      if (!current) return;
      current.watchers.delete(watcher);
      if (current.watchers.size === 0) this.watched.delete(id);
    };
  }

  /**
   * Resolves with the execution's view once it is terminal, or with null after `ms` (or at
   * shutdown, or when `signal` aborts: the client went away). `current` is the view the caller
   * already read: if it is terminal, nothing waits.
   */
  waitForTerminal(projectId: string, current: ExecutionView, ms: number, signal?: AbortSignal): Promise<ExecutionView | null> {
    if (isTerminal(current.execution.status)) return Promise.resolve(current);
    if (this.stopped || signal?.aborted) return Promise.resolve(null);
    return new Promise((resolve) => {
      const done = (view: ExecutionView | null) => {
        clearTimeout(timer);
        unwatch();
        this.onStop.delete(onStop);
        signal?.removeEventListener('abort', onAbort);
        resolve(view);
      };
      const unwatch = this.watch(projectId, current.execution.id, (view) => {
        if (isTerminal(view.execution.status)) done(view);
      });
      const timer = setTimeout(() => done(null), ms);
      const onStop = () => done(null);
      const onAbort = () => done(null);
      this.onStop.add(onStop);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.refresh(current.execution.id);
    });
  }

  /** Registers something to end at shutdown (an open stream); returns the unregister. */
  atStop(fn: () => void): () => void {
    this.onStop.add(fn);
    return () => this.onStop.delete(fn);
  }

  get stopping(): boolean {
    return this.stopped;
  }

  private changed(id: string): void {
    if (this.watched.has(id)) this.read(id);
  }

  private readAll(): void {
    for (const id of this.watched.keys()) this.read(id);
  }

  /**
   * Reads a watched execution now and hands it to its watchers. A new watcher calls it once: a
   * change that committed between its own read and its watch was notified before anyone here
   * listened for it.
   */
  refresh(id: string): void {
    this.read(id);
  }

  /** One read per execution at a time, however many watchers and notifications; a change during it reads again. */
  private read(id: string): void {
    const w = this.watched.get(id);
    if (!w || this.stopped) return;
    if (w.reading) {
      w.again = true;
      return;
    }
    w.reading = true;
    getExecutionWithSteps(this.o.db, w.projectId, id)
      .then((view) => {
        if (view) for (const watcher of [...w.watchers]) watcher(view);
      })
      .catch((err: unknown) => this.o.logger.warn('gateway.push.read_failed', { executionId: id, err: (err as Error).message }))
      .finally(() => {
        w.reading = false;
        if (w.again) {
          w.again = false;
          this.read(id);
        }
      });
  }

  /** Releases every waiting request and stream at once (they answer with what they have), then stops listening. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.resync);
    for (const fn of [...this.onStop]) fn();
    this.onStop.clear();
    await this.listener.stop();
  }
}
