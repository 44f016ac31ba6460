/**
 * The broker message (docs/architecture.md#the-paths-that-must-never-lose-money-or-work): its one
 * owner. libs/db writes it into outbox rows and reads them back, libs/messaging publishes it,
 * the relay and the worker read it off the broker. It lives in core because db and messaging
 * may not import each other and both need it.
 *
 * The broker carries nothing but "go look at execution X": a worker reads everything else from
 * the database.
 */

/** The message body: which execution to look at (and whose, for logs). */
export interface ExecutionMessage {
  executionId: string;
  projectId: string;
}

/** A written outbox row, as the gateway's dispatcher and the relay's sweep publish it. */
export interface OutboxEntry {
  id: number;
  /** The execution's category: the topology binds each category's work queue under its name. */
  routingKey: string;
  message: ExecutionMessage;
  /** The W3C traceparent of the span that wrote the row (migration 20261123000017), else null. */
  traceparent: string | null;
}

/**
 * Reads a message off the broker. Null when it names no execution (a malformed or foreign
 * message): the consumer dead-letters it. A message without a project id (none is written so)
 * is still honoured: the worker reads the execution from the database either way.
 */
export function parseExecutionMessage(payload: unknown): ExecutionMessage | null {
  const p = payload as { executionId?: unknown; projectId?: unknown } | null | undefined;
  if (typeof p?.executionId !== 'string') return null;
  return { executionId: p.executionId, projectId: typeof p.projectId === 'string' ? p.projectId : '' };
}
