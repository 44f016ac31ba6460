import type { ProviderUsage, ToolArgs, ToolName, ToolStep } from '@tes/catalog';
import type { StepRecord } from '@tes/db';
import type { Logger } from '@tes/observability';
import type { SharpSandbox } from './media/sharp-sandbox';
import type { ProviderSetup } from './providers/common';

/** A file a step produced; the engine stores it and records it as an artifact. */
export interface ProducedFile {
  format: string;
  mimeType: string;
  body: Buffer;
}

export interface StepResult {
  /**
   * Billing units this step produced, in the tool's unit (a non-negative integer; 0 for a free
   * step). The engine prices them with the catalog under the execution's price version.
   */
  units: number;
  /**
   * What the provider reported it billed for the step (OpenAI images' token `usage`), when it
   * reports it: the catalog prices the step from it instead of from the units alone.
   */
  usage?: ProviderUsage;
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

export function isWait(o: object): o is StepWait {
  return 'wait' in o;
}

export interface StepContext {
  /** Fields naming the execution in log lines (never its arguments). */
  logFields: { executionId: string; projectId: string; tool: string };
  /** The step's position in the plan (0-based). */
  index: number;
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
  /**
   * Durably records that the provider took nothing (it refused the request) and the step waits
   * to send it again on a re-check, with a checkpoint for that run. `null` clears the record:
   * call it before sending again, so a crash after the send is never followed by a second one.
   */
  recordUnsent(checkpoint: Record<string, unknown> | null): Promise<void>;
  /**
   * The database's clock (tes_now()), in ms since the epoch. A time a checkpoint keeps for a
   * later re-check, maybe on another worker (a job's deadline, the next read), is read from it
   * and compared with it, never with this process's clock.
   */
  databaseNow(): Promise<number>;
  /** A private temporary folder for this attempt, removed when the execution stops here. */
  workDir: string;
  /**
   * Downloads an uploaded file of the execution's project into workDir. Fails the step with
   * invalid_input_file when the file is gone (expired or deleted since the submit).
   */
  inputFile(fileId: string): Promise<InputFile>;
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

/** Runs one step of a tool, given the arguments its schema admitted (defaults applied). */
export type StepFn<Args> = (ctx: StepContext, args: Args) => Promise<StepOutcome>;

/** The worker side of a tool: one function per step name of its catalog definition. */
export type ToolRunner<Args extends object, Step extends string> = Readonly<Record<Step, StepFn<Args>>>;

/** The runner of built-in tool `T`, typed by its catalog definition's arguments and steps. */
export type RunnerOf<T extends ToolName> = ToolRunner<ToolArgs<T>, ToolStep<T>>;

/** A runner for every built-in tool: leaving out a tool, or a step of one, does not compile. */
export type Runners = { readonly [T in ToolName]: RunnerOf<T> };

/**
 * A runner as the engine holds it, its arguments' type erased: the engine passes it the
 * stored arguments, which the catalog checked against the tool's schema at submit.
 */
export type AnyRunner = Readonly<Record<string, StepFn<never>>>;
