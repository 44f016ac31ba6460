import type { InputFacts } from '@tes/core';

/** A model's entry in the price list. */
export interface ModelPrice {
  /** Price of one billing unit. */
  unitPriceMicros: number;
  /** Smallest charge for a successful execution. */
  minimumMicros: number;
  /**
   * What one started second of a step's deadline costs when the step runs out of it
   * (`step_timeout`): the worker time its input held (Catalog.timeoutCost). Absent in lists
   * published before it existed: free (DEFAULT_TIMEOUT_MICROS_PER_SECOND, 0), as that list promised.
   */
  timeoutMicrosPerSecond?: number;
  /**
   * Models the provider bills per megapixel (fal flux): the price of one megapixel of output,
   * which the tool counts the way the provider does. Absent: the model is priced per unit.
   */
  megapixelPriceMicros?: number;
  /**
   * Models the provider bills per token (OpenAI images): the price of a million prompt tokens
   * and of a million output (image) tokens. The quote prices the most tokens the input can
   * use; the step is settled on the tokens the provider reports (ProviderUsage).
   */
  inputTokenMicrosPerMillion?: number;
  outputTokenMicrosPerMillion?: number;
}

/** What the provider reported it billed for a step, where it reports it (OpenAI images' `usage`). */
export interface ProviderUsage {
  inputTokens: number;
  outputTokens: number;
}

/** The price list: JSON, versioned in Postgres, published with the admin CLI. */
export interface PriceList {
  currency: 'usd';
  tools: Record<string, { models: Record<string, ModelPrice> }>;
}

/** Who runs a provider model: the provider, its own id for the model, and when it goes away. */
export interface ProviderModel {
  name: keyof ProviderAvailability;
  /** The provider's id for the model (what the adapter sends, what `models check` looks up). */
  model: string;
  /**
   * The first day (UTC, YYYY-MM-DD) the provider no longer serves the model, from its
   * deprecation notice. From that day the catalog shows the model unavailable and refuses it
   * (model_unavailable, reason retired). An operator may set or move it (MODEL_RETIREMENTS).
   */
  retiresOn?: string;
}

export interface ModelDefinition {
  id: string;
  /** Set for a model an external provider runs. */
  provider?: ProviderModel;
  description: string;
  example: Record<string, unknown>;
  /** Whether what the model needs (a provider credential) is configured. */
  available: boolean;
  /**
   * The model runs at an external provider (its steps are `external`): a step of it that runs
   * out of its deadline waited on the provider, so it is never charged for the time.
   */
  external?: boolean;
  /**
   * The provider queues the job (Replicate, fal): the external step records the job's reference
   * and the execution waits (status `waiting`) between polls, holding a worker slot only for a
   * create or a poll. A provider model without it (OpenAI) answers in one request, which holds
   * the slot for the whole step: a worker's drain must wait for it (longestWorkerSteps).
   */
  queued?: boolean;
  /**
   * Programs a worker needs on its machine to run this model (e.g. ffmpeg, espeak-ng).
   * Workers report whether they have them; a model whose programs the workers lack is
   * shown unavailable instead of failing at run time.
   */
  requires?: readonly string[];
}

/** A file a tool reads, named by an uploaded file's id in its arguments. */
export interface InputFileRef {
  fileId: string;
  /** Upload formats the tool accepts here. */
  formats: readonly ('jpeg' | 'png' | 'wav' | 'mp3' | 'mp4')[];
  /** Where in the arguments, as a JSON pointer (for error details). */
  pointer: string;
}

/** A step's deadline when its plan gives none (StepPlan.timeoutMs). */
export const DEFAULT_STEP_TIMEOUT_MS = 10 * 60 * 1000;

/** One step of a plan. `Step` is the tool's union of step names. */
export interface StepPlan<Step extends string = string> {
  /** Which of the tool's steps runs: the worker calls its runner's function of this name. */
  name: Step;
  /**
   * The name recorded and shown for this step when it differs from `name`: a tool that runs
   * one step several times tells them apart (test.sleep's sleep_0, sleep_1, ...).
   */
  label?: string;
  /**
   * The step is charged for the units it reports (priced by the catalog, see `cost`). A step
   * without it is free and must report 0 units (a probe that only checks the input).
   */
  billed?: boolean;
  /**
   * True when the step calls an external provider that may charge us: if a crash leaves
   * its outcome unknown, the execution goes to needs_review instead of a rerun.
   */
  external?: boolean;
  /** Deadline for one attempt of the step; the worker aborts it after this long (default DEFAULT_STEP_TIMEOUT_MS). */
  timeoutMs?: number;
}

export interface UnitEstimate {
  /** Billing units the input will use at most. */
  units: number;
}

/**
 * A tool: its JSON Schema, models, pricing and steps, typed by the arguments `Args` its schema
 * admits (with defaults applied) and the union `Step` of its step names. Declare one with
 * `defineTool<Args>()({ ... })`; the worker's runner for it is keyed by the same step names.
 *
 * The members that take `Args` are methods, so a definition is assignable to the erased
 * `ToolDefinition` the catalog holds (method parameters are bivariant). The one place the
 * erasure is undone is `Catalog.resolve`: ajv has checked the arguments against the schema.
 */
export interface ToolDefinition<Args extends object = object, Step extends string = string> {
  name: string;
  category: string;
  description: string;
  /** Billing unit name as shown in quotes, e.g. "megapixel", "1k_characters", "step". */
  unit: string;
  inputSchema: Record<string, unknown>;
  example: Record<string, unknown>;
  models: ModelDefinition[];
  /** Every step the tool can plan, as a literal tuple: `plan` names only these. */
  steps: readonly Step[];
  /** Price description of a model given its price entry, e.g. "$0.001 per megapixel". */
  describePrice(price: ModelPrice): string;
  /**
   * The most units this input can use (pure: same input and facts, same answer). `files` holds
   * the measured facts of the uploaded files the input names (inputFiles); a tool whose cost
   * depends on its input prices the real file from them, and falls back to the schema's
   * largest input for a file without facts.
   */
  estimateUnits(args: Args, files: InputFacts): UnitEstimate;
  /**
   * What `units` of this input cost under the model's price: the quote's maximum prices the
   * estimate, the worker each billed step's reported units. Default: max(minimum, units x
   * unit price). A tool may price from its arguments instead (test.sleep), and a step from what
   * its provider reported it billed (`usage`; absent in a quote).
   */
  cost?(units: number, price: ModelPrice, args: Args, usage?: ProviderUsage): number;
  /** Ordered steps the worker runs for this input. */
  plan(args: Args): StepPlan<NoInfer<Step>>[];
  /** Uploaded files the input names; checked to exist in the project before quoting. */
  inputFiles?(args: Args): InputFileRef[];
}

/**
 * Declares a tool typed by its arguments: `defineTool<MyArgs>()({ name, steps: ['probe',
 * 'run'], plan, ... })`. Two calls because TypeScript cannot take `Args` from the caller and
 * infer the step names in one: they are read from the literal `steps` tuple alone, so `plan`
 * may only name those, and the worker's runner must implement each.
 */
export function defineTool<Args extends object>() {
  return <const Step extends string>(definition: ToolDefinition<Args, Step>): ToolDefinition<Args, Step> => definition;
}

/** Which providers have credentials configured (their models are available only then). */
export interface ProviderAvailability {
  replicate: boolean;
  fal: boolean;
  openai: boolean;
}

/** Models the workers reported they cannot run, as "tool:model" keys. */
export type Unavailable = ReadonlySet<string>;

export interface Quote {
  tool: string;
  model: string;
  priceVersion: string;
  currency: 'usd';
  minimumChargeMicros: number;
  maximumChargeMicros: number;
  unit: string;
  estimatedUnits: number;
}
