import type { PublicExecution, PublicProgress, PublicStep } from '../../core/src/public-execution';
import type { WebhookEvent } from '../../core/src/webhook-event';
import type { components } from '../../../clients/typescript/src/schema';
import type { WebhookEvent as SdkWebhookEvent } from '../../../clients/typescript/src/webhooks';

/**
 * Type-level checks of the wire types libs/core owns against services/gateway/openapi.json, as
 * clients/typescript/src/schema.ts types it. This file does not compile when a field is added, dropped
 * or retyped on one side only; wire-types.test.ts compiles it.
 */

type Schemas = components['schemas'];
/** true when each type is assignable to the other; a sentence saying which side is wider otherwise. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : 'the schema allows more than the type') : 'the type allows more than the schema';

// `output` is the tool's object: core types it as an open record, the schema names its artifacts
// (openapi-validator.test.ts checks the built objects). Everything else is the same field by field.
type Nested = 'output' | 'progress' | 'steps';
const executionFields: Same<Omit<PublicExecution, Nested>, Omit<Schemas['Execution'], Nested>> = true;
const executionKeys: Same<keyof PublicExecution, keyof Schemas['Execution']> = true;
const progress: Same<PublicProgress, Schemas['Progress']> = true;
const step: Same<PublicStep, Schemas['Step']> = true;
const sdkWebhookTypes: Same<WebhookEvent, SdkWebhookEvent['type']> = true;

export const WIRE_TYPE_CHECKS = { executionFields, executionKeys, progress, step, sdkWebhookTypes };
