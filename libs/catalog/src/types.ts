/** A model's entry in the price list. */
export interface ModelPrice {
  /** Price of one billing unit. */
  unitPriceMicros: number;
  /** Smallest charge for a successful execution. */
  minimumMicros: number;
}

/** The price list: JSON, versioned in Postgres, published with the admin CLI. */
export interface PriceList {
  currency: 'usd';
  tools: Record<string, { models: Record<string, ModelPrice> }>;
}

export interface ModelDefinition {
  id: string;
  description: string;
  example: Record<string, unknown>;
  /** Whether what the model needs (a provider credential) is configured. */
  available: boolean;
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

export interface StepPlan {
  name: string;
  /**
   * True when the step calls an external provider that may charge us: if a crash leaves
   * its outcome unknown, the execution goes to needs_review instead of a rerun.
   */
  external?: boolean;
  /** Deadline for one attempt of the step; the worker aborts it after this long. */
  timeoutMs?: number;
}

export interface UnitEstimate {
  /** Billing units the input will use at most. */
  units: number;
}

export interface ToolDefinition {
  name: string;
  category: string;
  description: string;
  /** Billing unit name as shown in quotes, e.g. "megapixel", "1k_characters", "step". */
  unit: string;
  inputSchema: Record<string, unknown>;
  example: Record<string, unknown>;
  models: ModelDefinition[];
  /** Price description of a model given its price entry, e.g. "$0.001 per megapixel". */
  describePrice(price: ModelPrice): string;
  /** The most units this input can use (pure: same input, same answer). */
  estimateUnits(args: Record<string, unknown>): UnitEstimate;
  /**
   * Maximum charge for the input. Default: max(minimum, units x unit price).
   * A tool may price from its arguments instead (test.sleep).
   */
  maximumCharge?(args: Record<string, unknown>, price: ModelPrice): number;
  /** Ordered steps the worker runs for this input. */
  plan(args: Record<string, unknown>): StepPlan[];
  /** Uploaded files the input names; checked to exist in the project before quoting. */
  inputFiles?(args: Record<string, unknown>): InputFileRef[];
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
