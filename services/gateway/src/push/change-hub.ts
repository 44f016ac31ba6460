import type { Knex } from 'knex';
import { isTerminal } from '@tes/core';
import {
  EXECUTION_CHANGES_CHANNEL,
  getExecutionVersions,
  getExecutionWithSteps,
  NotificationListener,
  queuePlaces,
  withQueuePlace,
  type ExecutionView,
} from '@tes/db';
import type { Logger } from '@tes/observability';

type Watcher = (view: ExecutionView) => void;

interface Watched {
  projectId: string;
  watchers: Set<Watcher>;
  /** A read is under way; `again` asks for one more after it (a change landed meanwhile). */
  reading: boolean;
  again: boolean;
  /** The version of the last view handed to the watchers (-1: none yet). */
  version: number;
  /** The last view handed to the watchers: a queued one is handed again when its place in line moves. */
  last?: ExecutionView;
}

/** Executions whose versions one re-sync query checks. */
const RESYNC_BATCH = 500;

export interface ChangeHubOptions {
  db: Knex;
  databaseUrl: string;
  logger: Logger;
  /** Every watched execution is read again this often whatever the notifications said (default 15 s). */
  resyncMs?: number;
  /** The places in line of the watched queued executions are read again this often (default 5 s). */
  queueRefreshMs?: number;
}

/**
 * Brings an execution's changes to the requests that wait for them (Prefer: wait, the event
 * stream), from whichever process made them: the database triggers notify
 * tes_execution_changes with the execution's id when a change commits, this hub LISTENs on one
 * connection of its own and, for an id someone here watches, reads the execution once and hands
 * the view to every watcher. No waiting request holds a pooled connection.
 *
 * Notifications are lost while the LISTEN connection is down; when it is back, and, belt and
 * braces, every `resyncMs`, the versions of every watched execution are read (one statement per
 * 500) and only those that changed are read in full: a re-sync of thousands of streams is a few
 * small queries, not a burst of full reads that would delay the changes arriving meanwhile.
 *
 * A queued execution's place in line (progress.queuePosition) moves with other executions'
 * claims, which notify nobody watching it: fanning every claim out to every stream of the
 * category would cost each claim as many reads as there are streams. Instead every
 * `queueRefreshMs` the places of the watched executions that are queued are read (one statement
 * per 500, the same for any number of watchers) and a view is handed again, with the same
 * version, to the watchers of those whose position changed. So a position is at most
 * `queueRefreshMs` old, and the cost follows the queued executions someone watches, not the
 * claims.
 */
export class ChangeHub {
  private readonly watched = new Map<string, Watched>();
  private readonly listener: NotificationListener;
  private readonly resync: NodeJS.Timeout;
  private readonly queueRefresh: NodeJS.Timeout;
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
        if (listening) void this.resyncAll();
        else o.logger.warn('gateway.push.listen_lost', { watched: this.watched.size });
      },
      onError: (err) => o.logger.warn('gateway.push.listen_error', { err: err.message }),
    });
    this.resync = setInterval(() => void this.resyncAll(), o.resyncMs ?? 15_000);
    this.resync.unref();
    this.queueRefresh = setInterval(() => void this.refreshPlaces(), o.queueRefreshMs ?? 5_000);
    this.queueRefresh.unref();
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  /** Calls `watcher` with the execution's view after each change; returns the unsubscribe. */
  watch(projectId: string, id: string, watcher: Watcher): () => void {
    let w = this.watched.get(id);
    if (!w) {
      w = { projectId, watchers: new Set(), reading: false, again: false, version: -1 };
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

  private resyncing = false;

  /** Reads the versions of everything watched and reads in full what changed since it was last handed out. */
  private async resyncAll(): Promise<void> {
    if (this.resyncing || this.stopped) return;
    this.resyncing = true;
    try {
      const ids = [...this.watched.keys()];
      for (let i = 0; i < ids.length && !this.stopped; i += RESYNC_BATCH) {
        const versions = await getExecutionVersions(this.o.db, ids.slice(i, i + RESYNC_BATCH));
        for (const [id, version] of versions) {
          const w = this.watched.get(id);
          if (w && version > w.version) this.read(id);
        }
      }
    } catch (err) {
      this.o.logger.warn('gateway.push.resync_failed', { err: (err as Error).message });
    } finally {
      this.resyncing = false;
    }
  }

  private refreshingPlaces = false;

  /** Reads the places in line of the watched queued executions and hands again the views whose position moved. */
  private async refreshPlaces(): Promise<void> {
    if (this.refreshingPlaces || this.stopped) return;
    this.refreshingPlaces = true;
    try {
      const queued = [...this.watched].filter(([, w]) => w.last?.execution.status === 'queued').map(([id]) => id);
      for (let i = 0; i < queued.length && !this.stopped; i += RESYNC_BATCH) {
        const batch = queued.slice(i, i + RESYNC_BATCH);
        const before = new Map(batch.map((id) => [id, this.watched.get(id)?.last]));
        const places = await queuePlaces(this.o.db, batch);
        for (const id of batch) {
          const w = this.watched.get(id);
          const last = before.get(id);
          // a read handed a newer view meanwhile: that one stands
          if (!w || !last || w.last !== last || w.reading) continue;
          const place = places.get(id);
          // no longer queued: its change is notified, and read in full then (or by the re-sync)
          if (!place || place.queuePosition === last.queue?.queuePosition) continue;
          this.hand(w, { ...last, queue: place });
        }
      }
    } catch (err) {
      this.o.logger.warn('gateway.push.queue_refresh_failed', { err: (err as Error).message });
    } finally {
      this.refreshingPlaces = false;
    }
  }

  private hand(w: Watched, view: ExecutionView): void {
    w.version = Math.max(w.version, view.version);
    w.last = view;
    for (const watcher of [...w.watchers]) watcher(view);
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
      .then((view) => (view ? withQueuePlace(this.o.db, view) : null))
      .then((view) => {
        if (view) this.hand(w, view);
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
    clearInterval(this.queueRefresh);
    for (const fn of [...this.onStop]) fn();
    this.onStop.clear();
    await this.listener.stop();
  }
}
