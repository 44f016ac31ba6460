import type { TesClient } from '../client';
import { ArtifactIntegrityError, ExecutionUnsuccessfulError, TesAbortError, TesApiError, TesError, TesNetworkError } from '../errors';
import { apiErrorSentence, problemLines } from '../error-words';
import { usd } from './format';

type Details = Record<string, unknown>;

const micros = (d: Details, key: string): number | undefined => (typeof d[key] === 'number' ? d[key] : undefined);
const text = (d: Details, key: string): string | undefined => (typeof d[key] === 'string' ? d[key] : undefined);

/**
 * The monthly cap refusal carries only what the execution needs; what the cap leaves is in
 * GET /tools/usage (the key may lack usage:read: then the sentence goes without it).
 */
async function capLeft(client: TesClient | undefined): Promise<string> {
  if (!client) return '';
  try {
    const u = await client.usage(AbortSignal.timeout(5_000));
    if (u.remainingCapMicros === null || u.monthlyCapMicros === null) return '';
    return `, ${usd(u.remainingCapMicros)} of the ${usd(u.monthlyCapMicros)} monthly cap is left`;
  } catch {
    return '';
  }
}

async function apiWords(e: TesApiError, client: TesClient | undefined): Promise<string[]> {
  const d = e.details ?? {};
  switch (e.code) {
    case 'insufficient_balance': {
      const need = micros(d, 'requiredMicros');
      const have = micros(d, 'availableMicros');
      return [
        `insufficient balance: ${need === undefined ? 'the balance is too low' : `this needs ${usd(need)}`}${have === undefined ? '' : `, ${usd(have)} is available`}`,
      ];
    }
    case 'monthly_cap_exceeded': {
      const need = micros(d, 'requiredMicros');
      return [`monthly cap reached: ${need === undefined ? 'this would go over it' : `this needs ${usd(need)}`}${await capLeft(client)}`];
    }
    case 'maximum_charge_insufficient': {
      const need = micros(d, 'requiredMaximumChargeMicros');
      return [`the price rose since the quote${need === undefined ? '' : `: this now needs up to ${usd(need)}`}; quote again`];
    }
    case 'price_version_mismatch':
      return [`the prices changed since the quote${text(d, 'currentPriceVersion') ? ` (now ${text(d, 'currentPriceVersion')})` : ''}; quote again`];
    case 'rate_limit_exceeded':
      return [`too many requests${e.retryAfterSeconds === undefined ? '' : `: try again in ${e.retryAfterSeconds} s`}`];
    case 'invalid_arguments':
      return ['invalid arguments:', ...problemLines(d).map((p) => `  ${p}`)];
    case 'invalid_request':
      return ['invalid request:', ...problemLines(d).map((p) => `  ${p}`)];
    case 'request_too_large':
    case 'file_too_large':
      return [apiErrorSentence(e.code, d, undefined)];
    case 'tool_not_found':
      return [`no tool named ${JSON.stringify(text(d, 'tool') ?? '?')}: tes tools lists them`];
    case 'tool_unavailable':
      return [`${text(d, 'tool') ?? 'the tool'} cannot run now: none of its models is available`];
    case 'model_unavailable':
      return [`model ${text(d, 'model') ?? ''} is not available now`.replace('  ', ' ')];
    case 'file_not_found':
      return [`file ${text(d, 'fileId') ?? ''} is not in this project or has expired: upload it again`.replace('  ', ' ')];
    case 'file_content_mismatch':
      return ['the file is not what its type says, or cannot be read (a damaged or unsupported file)'];
    case 'unsupported_media_type':
      return ['this kind of file cannot be uploaded (PNG, JPEG, WAV, MP3 and MP4 can)'];
    case 'platform_api_key_missing':
    case 'platform_api_key_invalid':
      return ['the API key in TES_API_KEY is not valid'];
    case 'platform_api_key_expired':
      return ['the API key in TES_API_KEY has expired'];
    case 'platform_api_key_revoked':
      return ['the API key in TES_API_KEY has been revoked'];
    case 'platform_api_key_scope_required':
      return [`this API key lacks the scope ${text(d, 'requiredScope') ?? 'this needs'}`];
    case 'platform_project_permission_required':
    case 'execution_cancel_not_allowed':
      return ['this API key may not do that in this project'];
    case 'execution_not_found':
      return ['no such execution in this project'];
    case 'artifact_not_found':
      return ['no such artifact'];
    case 'artifact_expired':
      return ['the artifact has expired (artifacts are kept 30 days)'];
    case 'webhook_endpoint_not_found':
      return ['no such webhook endpoint in this project'];
    case 'execution_not_cancellable':
      return ['the execution has already ended: there is nothing to cancel'];
    case 'execution_disabled':
      return ['running tools is switched off on this service for now; nothing was reserved'];
    case 'idempotency_key_reused':
      return ['this idempotency key was already used for another request'];
    default:
      // 5xx and codes this CLI does not know yet: the code in words, and the request id for support.
      return [`${e.code.replace(/_/g, ' ')} (HTTP ${e.status}${e.requestId ? `, request ${e.requestId}` : ''})`];
  }
}

function executionWords(e: ExecutionUnsuccessfulError): string {
  const x = e.execution;
  const charged = `charged ${usd(x.chargedMicros)}`;
  switch (x.status) {
    case 'failed':
      return `${x.id} failed: ${x.errorCode ?? 'error'}${x.errorMessage ? ` (${x.errorMessage})` : ''}; ${charged}`;
    case 'cancelled':
      return `${x.id} was cancelled; ${charged}`;
    case 'needs_review':
      return `${x.id} needs review by an operator (its outcome at a provider is unknown); ${usd(x.reservedMicros)} stays reserved until then`;
    default:
      return `${x.id} ended ${x.status}; ${charged}`;
  }
}

/**
 * What went wrong, in words, once: `insufficient balance: this needs $0.002, $0.0015 is
 * available`. The first line follows `tes <command>: `; further lines are indented details.
 * The codes stay in --json output (and the exit status) for scripts.
 */
export async function describeError(err: TesError, client?: TesClient): Promise<string[]> {
  if (err instanceof TesApiError) return apiWords(err, client);
  if (err instanceof ExecutionUnsuccessfulError) return [executionWords(err)];
  if (err instanceof TesNetworkError) return [`cannot reach the service: ${err.message}`];
  if (err instanceof TesAbortError) return [err.executionId ? `stopped waiting; ${err.executionId} goes on on the server` : 'stopped'];
  if (err instanceof ArtifactIntegrityError) return [`a download did not match its checksum, nothing was saved for it: ${err.message}`];
  return [err.message];
}
