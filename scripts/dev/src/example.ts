import { DevError } from './output';

const EXAMPLE_TOOL = 'image.render';
const EXAMPLE_ARGS = { text: 'Hello from npm start', width: 800, height: 600, format: 'png' };

export interface Quote {
  priceVersion: string;
  maximumChargeMicros: number;
}

/**
 * Asks the running gateway for the example's quote, so the printed submit carries the
 * current priceVersion and a sufficient maximumChargeMicros and works as pasted. Doubles
 * as a last check that the gateway answers on its public port with the seeded key.
 */
export async function fetchQuote(baseUrl: string, secret: string): Promise<Quote> {
  let res: Response;
  try {
    res = await fetch(`${baseUrl}/tools/quote`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ tool: EXAMPLE_TOOL, arguments: EXAMPLE_ARGS }),
      signal: AbortSignal.timeout(10_000),
    });
  } catch (err) {
    throw new DevError(`the gateway does not answer at ${baseUrl}: ${(err as Error).message}`);
  }
  const body = (await res.json().catch(() => undefined)) as { data?: Quote } | undefined;
  if (res.status !== 200 || !body?.data?.priceVersion) {
    throw new DevError(`the example quote failed: HTTP ${res.status} ${JSON.stringify(body)}`);
  }
  return body.data;
}

/**
 * Whether the banner may show the development key's secret: a development stack's key is
 * meant to be pasted, but NODE_ENV=production means the output may end up in a log others
 * read, and a printed secret spends the project's credit for whoever finds it.
 */
export function secretMayBePrinted(nodeEnv: string): boolean {
  return nodeEnv !== 'production';
}

export interface ExampleOptions {
  baseUrl: string;
  /** The seeded key. Its secret is shown only when secretMayBePrinted(nodeEnv). */
  key: { keyId: string; projectId: string; secret: string };
  nodeEnv: string;
  quote: Quote;
  idempotencyKey: string;
}

/** The lines about the seeded key: what it is, and how to revoke it (or, withheld, replace it). */
function keyText(o: ExampleOptions): { about: string; exportLine: string } {
  const revoke = `npm run admin -- key revoke --key ${o.key.keyId}`;
  if (secretMayBePrinted(o.nodeEnv)) {
    return {
      about: ` Development key (all scopes, $100 of credit): ${o.key.secret}
 It is a secret: whoever has it can spend the project's credit. Revoke it with
   ${revoke}`,
      exportLine: `export TES_API_KEY=${o.key.secret}`,
    };
  }
  return {
    about: ` Development key ${o.key.keyId} (all scopes, $100 of credit): its secret is not printed
 because NODE_ENV=production. Revoke it with
   ${revoke}
 and create a key of your own (its secret is printed once, keep it secret):
   npm run admin -- key create --project ${o.key.projectId} --name NAME --scopes tools:read,tools:execute,executions:read`,
    exportLine: 'export TES_API_KEY=...   # the secret `key create` printed',
  };
}

/**
 * The copy-paste walk through the API, in POSIX shell. `tes_json` (node, which every
 * developer here has) prints one field of a JSON answer, so no jq is needed.
 */
export function exampleText(o: ExampleOptions): string {
  const key = keyText(o);
  const submitBody = JSON.stringify({
    tool: EXAMPLE_TOOL,
    arguments: EXAMPLE_ARGS,
    priceVersion: o.quote.priceVersion,
    maximumChargeMicros: o.quote.maximumChargeMicros,
  });
  const auth = '-H "Authorization: Bearer $TES_API_KEY"';
  const json = "-H 'Content-Type: application/json'";
  return `
================================================================================
 The API is up at ${o.baseUrl}   (Ctrl-C stops everything)
 The console:     ${o.baseUrl}/console   (open it in a browser, sign in with the key)
 The reference:   ${o.baseUrl}/docs
${key.about}

 Try it (paste into a shell):

export TES_URL=${o.baseUrl}
${key.exportLine}
tes_json() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(process.argv[1].split(/[.[\\]]+/).filter(Boolean).reduce((v,k)=>v?.[k],JSON.parse(s))))' "$1"; }

# 1. the tool catalog, with prices
curl -sS -w '\\n' "$TES_URL/tools" ${auth}

# 2. a quote for rendering an image
curl -sS -w '\\n' -X POST "$TES_URL/tools/quote" ${auth} ${json} \\
  -d '${JSON.stringify({ tool: EXAMPLE_TOOL, arguments: EXAMPLE_ARGS })}'

# 3. submit it: priceVersion and maximumChargeMicros come from the quote; resending the
#    same Idempotency-Key returns the same execution instead of charging twice
EXECUTION_ID=$(curl -sS -X POST "$TES_URL/tools/${EXAMPLE_TOOL}" ${auth} ${json} \\
  -H 'Idempotency-Key: ${o.idempotencyKey}' \\
  -d '${submitBody}' | tes_json data.id); echo "$EXECUTION_ID"

# 4. follow it as it happens: Server-Sent Events (-N prints each as it comes), one per
#    change, each with an id: (Last-Event-ID resumes); the stream ends after the final one
curl -sS -N "$TES_URL/tools/executions/$EXECUTION_ID/events" ${auth}
#    … or wait for the end in one request (up to 60 s): 200 with Preference-Applied as soon
#    as it ends (the same header on step 3's submit answers it with the result)
curl -sS -i -w '\\n' "$TES_URL/tools/executions/$EXECUTION_ID" ${auth} -H 'Prefer: wait=30'
#    … or poll (the API's Retry-After says 5 s; 1 s is fine locally)
while :; do STATUS=$(curl -sS "$TES_URL/tools/executions/$EXECUTION_ID" ${auth} | tes_json data.status); echo "$STATUS"
  case "$STATUS" in queued|running|waiting) sleep 1 ;; *) break ;; esac; done

# 5. a short-lived download URL for the PNG (no key in it), then the file
ARTIFACT_ID=$(curl -sS "$TES_URL/tools/executions/$EXECUTION_ID" ${auth} | tes_json 'data.output.artifacts[0].id')
DOWNLOAD_URL=$(curl -sS "$TES_URL/tools/executions/$EXECUTION_ID/artifacts/$ARTIFACT_ID/download" ${auth} | tes_json data.url)
curl -sS -o hello.png "$DOWNLOAD_URL" && ls -l hello.png
================================================================================
`;
}
