import { Router, type Request, type Response } from 'express';
import { AppError, canonicalJson, isAppError, newId, sha256Hex } from '@tes/core';
import { findBindingSettled, getLiveFile, getSteps, submitExecution, type ExecutionRecord } from '@tes/db';
import type { ResolvedInput } from '@tes/catalog';
import type { Knex } from 'knex';
import { isTerminal } from '@tes/core';
import { crashPoint } from '@tes/lifecycle';
import { authOf, requireScope } from '../auth';
import type { GatewayDeps } from '../context';
import { publicExecution } from '../serialize';
import { compileCheck, IDEMPOTENCY_KEY } from '../validation';

interface QuoteBody {
  tool: string;
  arguments: Record<string, unknown>;
}
interface SubmitBody extends QuoteBody {
  priceVersion: string;
  maximumChargeMicros: number;
}

const TOOL_NAME = { type: 'string', minLength: 1, maxLength: 100 };
const checkQuoteBody = compileCheck<QuoteBody>({
  type: 'object',
  additionalProperties: false,
  required: ['tool', 'arguments'],
  properties: { tool: TOOL_NAME, arguments: { type: 'object' } },
});
const checkSubmitBody = compileCheck<SubmitBody>({
  type: 'object',
  additionalProperties: false,
  required: ['tool', 'arguments', 'priceVersion', 'maximumChargeMicros'],
  properties: {
    tool: TOOL_NAME,
    arguments: { type: 'object' },
    priceVersion: { type: 'string', minLength: 1, maxLength: 64 },
    maximumChargeMicros: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
  },
});

export function toolRoutes(deps: GatewayDeps): Router {
  const router = Router();
  const { catalog, settings, db } = deps;

  router.get('/tools', requireScope('tools:read'), async (_req, res) => {
    const s = await settings.get();
    res.json({ data: catalog.describe(s.prices, s.priceVersion, s.executionEnabled, s.unavailable) });
  });

  router.post('/tools/quote', requireScope('tools:read'), async (req, res) => {
    const body = checkQuoteBody(req.body);
    const s = await settings.get();
    const input = catalog.resolve(body.tool, body.arguments, s.unavailable);
    await checkInputFiles(db, authOf(res).projectId, input);
    res.json({ data: catalog.quote(input, s.prices, s.priceVersion) });
  });

  router.post('/tools/:tool', requireScope('tools:execute'), async (req: Request, res: Response) => {
    const auth = authOf(res);
    const pathTool = req.params.tool as string;
    if (!catalog.get(pathTool)) throw new AppError('tool_not_found', 'tool_not_found', { details: { tool: pathTool } });

    const idempotencyKey = req.get('idempotency-key');
    if (idempotencyKey === undefined || idempotencyKey === '') throw new AppError('idempotency_key_required');
    if (!IDEMPOTENCY_KEY.test(idempotencyKey)) throw new AppError('idempotency_key_invalid');

    const body = checkSubmitBody(req.body);
    if (body.tool !== pathTool) throw new AppError('tool_mismatch', 'tool_mismatch', { details: { pathTool, bodyTool: body.tool } });
    const requestDigest = sha256Hex(canonicalJson(body));

    // A resend is answered from its binding whatever else has changed since (the price, the
    // tool's availability, …): the original execution stands. A fresh submit does not pay
    // for a lookup: submitExecution finds an existing binding itself (its insert fails on the
    // binding's unique index), and a check that fails looks for the binding before refusing.
    let input: ResolvedInput;
    let priceVersion: string;
    let reservedMicros: number;
    try {
      const s = await settings.get();
      if (!s.executionEnabled) throw new AppError('execution_disabled', 'execution_disabled', { retryable: true });
      input = catalog.resolve(pathTool, body.arguments, s.unavailable);
      await checkInputFiles(db, auth.projectId, input);
      const quote = catalog.quote(input, s.prices, s.priceVersion);
      if (body.priceVersion !== s.priceVersion) {
        throw new AppError('price_version_mismatch', 'price_version_mismatch', { details: { currentPriceVersion: s.priceVersion } });
      }
      if (body.maximumChargeMicros < quote.maximumChargeMicros) {
        throw new AppError('maximum_charge_insufficient', 'maximum_charge_insufficient', {
          details: { requiredMaximumChargeMicros: quote.maximumChargeMicros },
        });
      }
      priceVersion = s.priceVersion;
      reservedMicros = quote.maximumChargeMicros;
    } catch (err) {
      if (!isAppError(err)) throw err;
      // waits for an original with this key that is still in flight (never refuse a resend it would replay)
      const prior = await findBindingSettled(db, auth.projectId, idempotencyKey);
      if (prior) return replay(deps, res, prior, auth.keyId, requestDigest);
      throw err;
    }

    // a crash here: nothing was written, the resend creates the execution
    crashPoint('gateway.submit.before_write');
    const result = await submitExecution(db, {
      id: newId('exe'),
      projectId: auth.projectId,
      apiKeyId: auth.keyId,
      tool: input.tool.name,
      model: input.model,
      category: input.tool.category,
      arguments: input.arguments,
      priceVersion,
      totalSteps: input.plan.length,
      reservedMicros,
      idempotencyKey,
      requestDigest,
      fileIds: (input.tool.inputFiles?.(input.arguments) ?? []).map((ref) => ref.fileId),
      dispatchDeadlineMs: deps.config.dispatchDeadlineMs,
    });
    crashPoint('gateway.submit.after_commit');
    if (result.kind === 'existing') return replay(deps, res, result.execution, auth.keyId, requestDigest);

    const e = result.execution;
    deps.dispatcher.dispatch(result.outbox);
    deps.metrics.executionsTotal.inc({ tool: e.tool, status: 'queued' });
    deps.logger.info('gateway.execution.accepted', {
      requestId: res.locals.requestId,
      executionId: e.id,
      projectId: e.projectId,
      tool: e.tool,
      reservedMicros: e.reservedMicros,
    });
    res.status(202).set({ 'Retry-After': '5', Location: `/tools/executions/${e.id}` }).json({ data: publicExecution(e, []) });
  });

  return router;
}

/** Same key + same API key + same body: the original execution. Anything else: 409. */
async function replay(deps: GatewayDeps, res: Response, e: ExecutionRecord, keyId: string, digest: string): Promise<void> {
  if (e.apiKeyId !== keyId || e.requestDigest !== digest) throw new AppError('idempotency_key_reused');
  const steps = await getSteps(deps.db, e.projectId, [e.id]);
  res.set('Idempotent-Replayed', 'true');
  if (isTerminal(e.status)) {
    res.status(200).json({ data: publicExecution(e, steps) });
  } else {
    res.status(202).set({ 'Retry-After': '5', Location: `/tools/executions/${e.id}` }).json({ data: publicExecution(e, steps) });
  }
}

/**
 * Every uploaded file the arguments name must be a live file of the caller's project, in a
 * format the tool takes there. Another project's file id is indistinguishable from an
 * unknown one.
 */
async function checkInputFiles(db: Knex, projectId: string, input: ResolvedInput): Promise<void> {
  for (const ref of input.tool.inputFiles?.(input.arguments) ?? []) {
    const file = await getLiveFile(db, projectId, ref.fileId);
    if (!file) throw new AppError('file_not_found', 'file_not_found', { details: { fileId: ref.fileId, instancePath: ref.pointer } });
    if (!(ref.formats as readonly string[]).includes(file.format)) {
      throw new AppError('invalid_arguments', 'invalid_arguments', {
        details: { errors: [{ instancePath: ref.pointer, keyword: 'fileFormat', message: `must be an uploaded ${ref.formats.join(' or ')} file`, params: { format: file.format } }] },
      });
    }
  }
}
