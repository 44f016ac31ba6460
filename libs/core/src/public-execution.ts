import type { ExecutionStatus } from './states';

/**
 * The public execution object (docs/api.md#the-execution): its one typed owner. libs/db builds
 * it (publicExecution), the gateway answers with it and streams it, webhooks carry it. The
 * machine-readable twin is the OpenAPI `Execution` schema (services/gateway/openapi.json);
 * libs/db/test/public-execution-schema.test.ts fails when the two differ in a field or a type,
 * and the OpenAPI validator tests check the built objects against the schema itself.
 */
export interface PublicExecution {
  id: string;
  tool: string;
  model: string;
  status: ExecutionStatus;
  /** The arguments as run, with schema defaults applied and the chosen model. */
  arguments: Record<string, unknown>;
  priceVersion: string;
  reservedMicros: number;
  chargedMicros: number;
  currency: 'usd';
  cancelRequested: boolean;
  progress: PublicProgress;
  steps: PublicStep[];
  /** The tool's output (its artifacts, without URLs), null until it succeeded. */
  output: Record<string, unknown> | null;
  errorCode: string | null;
  errorMessage: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface PublicProgress {
  completedSteps: number;
  totalSteps: number;
  currentStep: string | null;
  /** Only while queued, where the reader asked for the place in line. */
  queuePosition?: number;
  estimatedStartAt?: string | null;
}

export interface PublicStep {
  index: number;
  name: string;
  status: 'running' | 'succeeded' | 'failed' | 'cancelled';
  costMicros: number;
  startedAt: string;
  finishedAt: string | null;
}
