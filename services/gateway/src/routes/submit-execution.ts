import type { Request, Response } from 'express';
import { AppError, canonicalJson, isAppError, isTerminal, newId, sha256Hex } from '@tes/core';
import { findBindingSettled, getSteps, submitExecution, type ExecutionRecord, type ExecutionView, type SubmitResult } from '@tes/db';
import { crashPoint } from '@tes/lifecycle';
import { logFields } from '@tes/observability';
import { currentTraceparent, withSpan } from '@tes/tracing';
import type { AuthContext, GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';
import { sendJson } from '../respond';
import type { QuoteBody } from './create-quote';
import { quoteInput } from './input-files';
import { executionBody, preferenceApplied, preferredWaitSeconds, waitForEnd } from '../push/wait';

/** components.schemas.SubmitRequest */
interface SubmitBody extends QuoteBody {
  priceVersion: string;
  maximumChargeMicros: number;
}

const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

/** A paid execution: reserves the current quote's maximum and queues the work (202), or answers a resend from its binding. */
export function submitExecutionRoute(deps: GatewayDeps): KeyRoute<SubmitBody> {
  return {
    method: 'post',
    path: '/tools/{tool}',
    operationId: 'submitExecution',
    scope: 'tools:execute',
    body: 'json',
    // an unknown tool, then a missing or malformed key, are answered before the body's shape
    precheck: (req, operation) => {
      const pathTool = req.params.tool as string;
      if (!deps.catalog.get(pathTool)) throw new AppError('tool_not_found', 'tool_not_found', { details: { tool: pathTool } });
      const key = req.get(IDEMPOTENCY_KEY_HEADER);
      if (key === undefined || key === '') throw new AppError('idempotency_key_required');
      if (!operation.headerConforms(IDEMPOTENCY_KEY_HEADER, key)) throw new AppError('idempotency_key_invalid');
    },
    handle: async ({ req, res, auth, body }) => {
      const pathTool = req.params.tool as string;
      if (body.tool !== pathTool) throw new AppError('tool_mismatch', 'tool_mismatch', { details: { pathTool, bodyTool: body.tool } });
      const key = req.get(IDEMPOTENCY_KEY_HEADER)!; // present and well-formed: precheck
      const requestDigest = sha256Hex(canonicalJson(body));

      const result = await submitOrFindBinding(deps, auth, body, key, requestDigest);
      if (result.kind === 'existing') return answerBound(deps, req, res, result.execution, auth.keyId, requestDigest);

      const e = result.execution;
      deps.dispatcher.dispatch(result.outbox);
      deps.metrics.executionsTotal.inc({ tool: e.tool, status: 'queued' });
      // a line per accepted submit: the flat-record path (logFields), not winston's format chain
      logFields(deps.logger, 'info', 'gateway.execution.accepted', {
        requestId: res.locals.requestId as string,
        executionId: e.id,
        projectId: e.projectId,
        tool: e.tool,
        reservedMicros: e.reservedMicros,
      });
      await answer(deps, req, res, { execution: e, steps: [], version: 0 });
    },
  };
}

/**
 * The submit, or the execution the key is already bound to. A resend is answered from its
 * binding whatever else has changed since (the price, the tool's availability, …): the
 * original execution stands. A fresh submit does not pay for a lookup: submitExecution finds
 * an existing binding itself (its insert fails on the binding's unique index), and a check
 * that fails looks for the binding before refusing.
 */
async function submitOrFindBinding(
  deps: GatewayDeps,
  auth: AuthContext,
  body: SubmitBody,
  idempotencyKey: string,
  requestDigest: string,
): Promise<SubmitResult> {
  const { catalog, settings, db } = deps;
  let priced;
  try {
    const s = await settings.get();
    if (!s.executionEnabled) throw new AppError('execution_disabled', 'execution_disabled', { retryable: true });
    const input = catalog.resolve(body.tool, body.arguments, s.unavailable, s.today);
    const quote = await quoteInput({ catalog, db }, auth.projectId, input, s);
    if (body.priceVersion !== s.priceVersion) {
      throw new AppError('price_version_mismatch', 'price_version_mismatch', { details: { currentPriceVersion: s.priceVersion } });
    }
    if (body.maximumChargeMicros < quote.maximumChargeMicros) {
      throw new AppError('maximum_charge_insufficient', 'maximum_charge_insufficient', {
        details: { requiredMaximumChargeMicros: quote.maximumChargeMicros },
      });
    }
    priced = { input, priceVersion: s.priceVersion, reservedMicros: quote.maximumChargeMicros };
  } catch (err) {
    if (!isAppError(err)) throw err;
    // waits for an original with this key that is still in flight (never refuse a resend it would replay)
    const prior = await findBindingSettled(db, auth.projectId, idempotencyKey);
    if (prior) return { kind: 'existing', execution: prior };
    throw err;
  }

  const { input } = priced;
  // a crash here: nothing was written, the resend creates the execution
  crashPoint('gateway.submit.before_write');
  const result = await withSpan('execution.submit', () =>
    submitExecution(db, {
      id: newId('exe'),
      projectId: auth.projectId,
      apiKeyId: auth.keyId,
      tool: input.tool.name,
      model: input.model,
      category: input.tool.category,
      arguments: input.arguments,
      priceVersion: priced.priceVersion,
      totalSteps: input.plan.length,
      reservedMicros: priced.reservedMicros,
      idempotencyKey,
      requestDigest,
      fileIds: (input.tool.inputFiles?.(input.arguments) ?? []).map((ref) => ref.fileId),
      dispatchDeadlineMs: deps.config.dispatchDeadlineMs,
      traceparent: currentTraceparent(),
    }),
  );
  crashPoint('gateway.submit.after_commit');
  return result;
}

/**
 * The one answer to a request whose key is already bound: same key + same API key + same
 * body is the original execution (Idempotent-Replayed); anything else is 409.
 */
async function answerBound(deps: GatewayDeps, req: Request, res: Response, e: ExecutionRecord, keyId: string, digest: string): Promise<void> {
  if (e.apiKeyId !== keyId || e.requestDigest !== digest) throw new AppError('idempotency_key_reused');
  const steps = await getSteps(deps.db, e.projectId, [e.id]);
  res.set('Idempotent-Replayed', 'true');
  await answer(deps, req, res, { execution: e, steps, version: 0 });
}

/**
 * An accepted (or replayed) execution: 200 once it has ended, else 202 with Retry-After: 5 and
 * its Location. With `Prefer: wait=N` the answer waits up to N seconds for the end; one that
 * came within it carries Preference-Applied.
 */
async function answer(deps: GatewayDeps, req: Request, res: Response, accepted: ExecutionView): Promise<void> {
  let view = accepted;
  const wait = preferredWaitSeconds(req);
  if (wait !== null) {
    const { lookupId, organizationId } = res.locals.auth as AuthContext;
    const caller = { projectId: accepted.execution.projectId, organizationId, lookupId, keys: deps.keys, held: deps.held };
    const waited = await waitForEnd(deps.changes, req, caller, accepted, wait, true);
    view = waited.view;
    if (waited.applied) preferenceApplied(res, wait);
  }
  if (isTerminal(view.execution.status)) {
    sendJson(res, 200, executionBody(view));
  } else {
    res.setHeader('Retry-After', '5');
    res.setHeader('Location', `/tools/executions/${view.execution.id}`);
    sendJson(res, 202, executionBody(view));
  }
}
