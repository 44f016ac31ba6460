import type { SharpSandbox } from './media/sharp-sandbox';
import type { Catalog, PriceList } from '@tes/catalog';
import type { ExecutionRecord, StepRecord } from '@tes/db';
import type { Logger } from '@tes/observability';
import type { ObjectStore } from '@tes/storage';
import type { ProviderSetup } from './providers/common';

/** A file a step produced; the engine stores it and records it as an artifact. */
export interface ProducedFile {
  format: string;
  mimeType: string;
  body: Buffer;
}

export interface StepResult {
  /** What this step cost us (micro-USD). The execution is charged the sum, capped at the reservation. */
  costMicros: number;
  /** Small JSON a later attempt or step may need (never file bytes). */
  checkpoint?: Record<string, unknown>;
  files?: ProducedFile[];
  /** Small facts merged into the execution's output (e.g. width, durationSeconds). */
  facts?: Record<string, unknown>;
}

/**
 * The step handed work to an external provider and recorded its reference: the execution
 * waits (status `waiting`, consumer slot freed) and the step runs again on a re-check, with
 * `externalRef` set, to poll.
 */
export interface StepWait {
  wait: true;
}

export type StepOutcome = StepResult | StepWait;

export function isWait(o: StepOutcome): o is StepWait {
  return (o as StepWait).wait === true;
}

/**
 * A request that may have reached the provider failed without an answer (connection lost,
 * timeout, a 5xx to a create): it may have run and may cost money. The engine never sends
 * it again; the execution goes to needs_review with its reservation held.
 */
export class OutcomeUnknown extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutcomeUnknown';
  }
}

export interface StepContext {
  execution: ExecutionRecord;
  args: Record<string, unknown>;
  index: number;
  name: string;
  /** Aborted on deadline, lost lease or shutdown: pass it to child processes, HTTP and S3 calls. */
  signal: AbortSignal;
  /** Steps already recorded for this execution (checkpoints of earlier steps). */
  previous: StepRecord[];
  /** The provider reference this step recorded on an earlier run (a re-check), else null. */
  externalRef: string | null;
  /** The checkpoint this step recorded with its reference, else null. */
  stepCheckpoint: Record<string, unknown> | null;
  /**
   * Durably records the provider's job reference before the step waits on it. Call it as
   * soon as the provider answered the create, before anything else can fail.
   */
  recordExternalRef(ref: string, checkpoint?: Record<string, unknown>): Promise<void>;
  prices: PriceList;
  /** A private temporary folder for this attempt, removed when the execution stops here. */
  workDir: string;
  /**
   * Downloads an uploaded file of the execution's project into workDir. Fails the step with
   * invalid_input_file when the file is gone (expired or deleted since the submit).
   */
  inputFile(fileId: string): Promise<InputFile>;
  catalog: Pick<Catalog, 'get' | 'charge'>;
  store: ObjectStore;
  logger: Logger;
  /** HTTP client (address-guarded), base URLs and credentials for provider-backed models. */
  providers: ProviderSetup;
  /** Runs sharp pipelines in killable, CPU- and memory-capped child processes. */
  sandbox: SharpSandbox;
}

export interface InputFile {
  path: string;
  format: string;
  sizeBytes: number;
}

/** The worker-side implementation of a catalog tool: runs one named step at a time. */
export interface ToolRunner {
  runStep(ctx: StepContext): Promise<StepOutcome>;
}

/** Resolves after `ms`, or rejects with the signal's reason when aborted first. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
