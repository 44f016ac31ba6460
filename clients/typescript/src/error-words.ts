import { byteSize, usd } from './money';

type Details = Record<string, unknown>;

const num = (d: Details, key: string): number | undefined => (typeof d[key] === 'number' ? d[key] : undefined);
const str = (d: Details, key: string): string | undefined => (typeof d[key] === 'string' ? d[key] : undefined);

/** A JSON pointer of an ajv error as an argument path: /slides/1/fileId -> slides[1].fileId. */
export function pointerToPath(pointer: string): string {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  return parts.map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`)).join('') || 'arguments';
}

/**
 * The problems of an invalid_arguments or invalid_request answer, one line each: the gateway's
 * own hint when it gives one, else the field's path and ajv's message (an older gateway).
 */
export function problemLines(d: Details): string[] {
  const list = Array.isArray(d.errors) ? (d.errors as { instancePath?: unknown; message?: unknown; params?: unknown; hint?: unknown }[]) : [];
  return list.map((p) => {
    if (typeof p.hint === 'string') return p.hint;
    const path = pointerToPath(typeof p.instancePath === 'string' ? p.instancePath : '');
    const params = typeof p.params === 'object' && p.params !== null ? (p.params as Record<string, unknown>) : {};
    // ajv says "must NOT have additional properties" without naming it; the name is in params.
    const extra = typeof params.additionalProperty === 'string' ? `: ${params.additionalProperty}` : '';
    const allowed = Array.isArray(params.allowedValues) ? `: ${params.allowedValues.map(String).join(', ')}` : '';
    return `${path} ${typeof p.message === 'string' ? p.message : 'is not valid'}${extra}${allowed}`;
  });
}

function invalid(what: string, d: Details): string {
  const hint = str(d, 'hint') ?? problemLines(d).join('; ');
  return hint ? `${what}: ${hint}` : what;
}

/**
 * What an API error answer means, in one line, with the amounts and limits its details carry:
 * "insufficient balance: the submit needs $0.07 reserved and the project has $0.01 available".
 * The stable code is not in it (TesApiError's message appends it); an unknown code reads as
 * its words. Never a key, a body or a URL: details carry none.
 */
export function apiErrorSentence(code: string, d: Details, retryAfterSeconds: number | undefined): string {
  switch (code) {
    case 'insufficient_balance': {
      const need = num(d, 'requiredMicros');
      const have = num(d, 'availableMicros');
      if (need === undefined) return 'insufficient balance';
      return `insufficient balance: the submit needs ${usd(need)} reserved${have === undefined ? '' : ` and the project has ${usd(have)} available`}`;
    }
    case 'monthly_cap_exceeded': {
      const need = num(d, 'requiredMicros');
      if (need === undefined) return 'monthly cap reached: the submit would take the project past its monthly cap';
      return `monthly cap reached: the submit needs ${usd(need)} reserved, more than the project's monthly cap leaves`;
    }
    case 'maximum_charge_insufficient': {
      const need = num(d, 'requiredMaximumChargeMicros');
      return `maximum charge too low: ${need === undefined ? 'it is below the current quote' : `this input now needs up to ${usd(need)}`}; quote again`;
    }
    case 'price_version_mismatch': {
      const now = str(d, 'currentPriceVersion');
      return `the prices changed since the quote${now ? ` (now ${now})` : ''}; quote again`;
    }
    case 'rate_limit_exceeded':
      return `too many requests${retryAfterSeconds === undefined ? '' : `: try again in ${retryAfterSeconds} s`}`;
    case 'invalid_arguments':
      return invalid('invalid arguments', d);
    case 'invalid_request':
      return invalid('invalid request', d);
    case 'request_too_large': {
      const limit = num(d, 'limitBytes');
      return `the request is too large${limit === undefined ? '' : `: the gateway takes at most ${byteSize(limit)}`}`;
    }
    case 'file_too_large': {
      const limit = num(d, 'maxBytes');
      return `the file is too large${limit === undefined ? '' : `: an upload is at most ${byteSize(limit)}`}`;
    }
    case 'platform_api_key_scope_required':
      return `this API key lacks the scope ${str(d, 'requiredScope') ?? 'this needs'}`;
    case 'tool_not_found':
      return `no tool named ${JSON.stringify(str(d, 'tool') ?? '?')}`;
    case 'tool_unavailable':
      return `${str(d, 'tool') ?? 'the tool'} cannot run now: none of its models is available`;
    case 'file_not_found':
      return `file ${str(d, 'fileId') ?? ''} is not in this project or has expired: upload it again`.replace('  ', ' ');
    case 'execution_not_cancellable':
      return `the execution has already ended${str(d, 'status') ? ` (${str(d, 'status')})` : ''}: there is nothing to cancel`;
    default:
      return code.replace(/_/g, ' ');
  }
}
