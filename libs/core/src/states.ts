/** Execution states and the moves between them (docs/api.md#states-and-moves). */
export const EXECUTION_STATUSES = ['queued', 'running', 'waiting', 'succeeded', 'failed', 'cancelled', 'needs_review'] as const;

export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];

export const TERMINAL_STATUSES: readonly ExecutionStatus[] = ['succeeded', 'failed', 'cancelled'];

/** States whose reservation is still held (not settled). needs_review keeps it until resolved. */
export const OPEN_STATUSES: readonly ExecutionStatus[] = ['queued', 'running', 'waiting', 'needs_review'];

const MOVES: Record<ExecutionStatus, readonly ExecutionStatus[]> = {
  queued: ['running', 'cancelled', 'failed'],
  running: ['waiting', 'succeeded', 'failed', 'cancelled', 'needs_review'],
  waiting: ['running', 'succeeded', 'failed', 'cancelled', 'needs_review'],
  // operator only (admin CLI `execution resolve`)
  needs_review: ['succeeded', 'failed'],
  succeeded: [],
  failed: [],
  cancelled: [],
};

export function isTerminal(status: ExecutionStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

export function canMove(from: ExecutionStatus, to: ExecutionStatus): boolean {
  return MOVES[from].includes(to);
}

/** The states from which a move to `to` is allowed; used to fence SQL updates. */
export function statesThatMoveTo(to: ExecutionStatus): ExecutionStatus[] {
  return EXECUTION_STATUSES.filter((from) => MOVES[from].includes(to));
}

/** An execution has at most this many steps (docs/api.md#limits). */
export const MAX_STEPS = 20;

/** How long uploads and artifacts are kept (docs/api.md#limits: 30 days), from their creation. */
export const RETENTION_MS = 30 * 24 * 3600 * 1000;
