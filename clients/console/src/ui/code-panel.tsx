import { useMemo, useState } from 'preact/hooks';
import type { Quote } from '../api';
import type { JsonObject } from '../schema';
import { snippet, type SnippetLanguage } from '../snippets';

const LANGUAGES: readonly { id: SnippetLanguage; label: string; note: string }[] = [
  { id: 'curl', label: 'curl', note: 'One request, answered when the run ends (or after 60 s with its state then).' },
  {
    id: 'typescript',
    label: 'TypeScript',
    note: 'The SDK @tes/client (clients/typescript). Save it as run.mts and run node run.mts (Node ≥ 22.18 strips the types), or use tsx.',
  },
  { id: 'python', label: 'Python', note: 'The client tes_client (clients/python); Python ≥ 3.9.' },
];

/**
 * The form as code: the same tool, arguments and quoted maximum as curl, TypeScript and
 * Python, to copy into a program. Shown once the form has a quote, whose price version and
 * maximum the code carries; the key stays out of it (TES_API_KEY).
 */
export function CodePanel(props: { tool: string; args: JsonObject; quote: Quote | null }) {
  const [language, setLanguage] = useState<SnippetLanguage>('curl');
  const [copied, setCopied] = useState<SnippetLanguage | null>(null);
  const argsKey = JSON.stringify(props.args);
  // a new key for each new input: a second paste of the same code is a replay, not a second charge
  const idempotencyKey = useMemo(() => `console-${crypto.randomUUID()}`, [props.tool, argsKey]);
  const { quote } = props;
  const copy = (text: string) => {
    void navigator.clipboard?.writeText(text).then(() => setCopied(language));
  };
  return (
    <section class="panel code-panel" aria-labelledby="h-code">
      <h2 id="h-code">Code</h2>
      {!quote ? (
        <p class="muted">Once the form has a quote, here it is as curl, TypeScript and Python.</p>
      ) : (
        <>
          <div class="code-tabs" role="tablist" aria-label="Language">
            {LANGUAGES.map((l) => (
              <button
                key={l.id}
                type="button"
                role="tab"
                id={`tab-${l.id}`}
                aria-selected={language === l.id}
                aria-controls={`code-${l.id}`}
                onClick={() => {
                  setLanguage(l.id);
                  setCopied(null);
                }}
              >
                {l.label}
              </button>
            ))}
          </div>
          {LANGUAGES.map((l) => {
            const text = snippet(l.id, {
              baseUrl: location.origin,
              tool: props.tool,
              args: props.args,
              priceVersion: quote.priceVersion,
              maximumChargeMicros: quote.maximumChargeMicros,
              idempotencyKey,
            });
            return (
              <div key={l.id} id={`code-${l.id}`} role="tabpanel" aria-labelledby={`tab-${l.id}`} hidden={language !== l.id}>
                <pre class="code" data-lang={l.id}>
                  <code>{text}</code>
                </pre>
                <p class="hint">
                  {l.note} Set <code>TES_API_KEY</code> to your key first.{' '}
                  <button type="button" class="small" onClick={() => copy(text)}>
                    {copied === l.id ? 'Copied' : 'Copy'}
                  </button>
                </p>
              </div>
            );
          })}
        </>
      )}
    </section>
  );
}
