/**
 * A request that may have reached the provider failed without an answer (connection lost,
 * timeout, a 5xx to a create): it may have run and may cost money. The engine never sends
 * it again; the execution goes to needs_review with its reservation held.
 *
 * Its own module because both the step contract (runner.ts, which names the providers'
 * setup) and the providers throw it.
 */
export class OutcomeUnknown extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutcomeUnknown';
  }
}
