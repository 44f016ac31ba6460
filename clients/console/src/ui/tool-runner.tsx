import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, type Api, type Catalog, type Execution, type Quote, type Tool } from '../api';
import { usd } from '../format';
import { serverFieldErrors, validate, type Json, type JsonObject, type Schema } from '../schema';
import { changedPointers, shownErrors, touch, type Touched } from '../touched';
import { CodePanel } from './code-panel';
import { ErrorBox } from './error-box';
import { ExecutionView } from './execution-view';
import { SchemaForm } from './schema-form';

const QUOTE_DEBOUNCE_MS = 400;

const isPlaceholder = (v: Json) => typeof v === 'string' && v.startsWith('file_');

/**
 * The example without its placeholder file ids, which name no file of this project: a field
 * that held one is left for an upload, and a list item that named one (an image slide) is
 * left out, so the example stays valid instead of opening with a slide that is neither.
 */
function withoutFileIds(value: Json): Json {
  if (Array.isArray(value)) {
    const namesFile = (item: Json) => item !== null && typeof item === 'object' && !Array.isArray(item) && Object.values(item).some(isPlaceholder);
    return value.filter((item) => !namesFile(item)).map(withoutFileIds);
  }
  if (value !== null && typeof value === 'object') {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(value)) if (!isPlaceholder(v)) out[k] = withoutFileIds(v);
    return out;
  }
  return value;
}

function exampleOf(tool: Tool, modelId?: string): JsonObject {
  const model = tool.models.find((m) => m.id === modelId);
  const example = model ? { ...(model.example as JsonObject), model: model.id } : (tool.example as JsonObject);
  return withoutFileIds(example) as JsonObject;
}

/**
 * When a run ends, its result is brought into view: on a phone the result is below the form,
 * and the focus moved to its heading only scrolled that heading to the bottom of the screen.
 * A result panel already near the top (the sticky one beside a desktop form) is left alone.
 */
function showResult(): void {
  const panel = document.getElementById('result-panel');
  if (!panel) return;
  const top = panel.getBoundingClientRect().top;
  if (top < 0 || top > innerHeight / 4) panel.scrollIntoView({ block: 'start' });
}

/**
 * Picks a tool, fills its form, quotes it as it is edited, shows it as code and runs it.
 * `from` (an execution id, #run/exe_…) fills the form with that execution's tool and input.
 */
export function ToolRunner(props: { api: Api; catalog: Catalog; from?: string; onEnded: (e: Execution) => void }) {
  const { api, catalog } = props;
  const firstAvailable = catalog.tools.find((t) => t.available) ?? catalog.tools[0];
  const [toolName, setToolName] = useState(firstAvailable?.name ?? '');
  const tool = catalog.tools.find((t) => t.name === toolName);
  const [args, setArgs] = useState<JsonObject>(() => (tool ? exampleOf(tool) : {}));
  const [quote, setQuote] = useState<{ quote: Quote; args: string } | null>(null);
  const [quoteError, setQuoteError] = useState<unknown>(null);
  const [quoting, setQuoting] = useState(false);
  const [submitError, setSubmitError] = useState<unknown>(null);
  const [submitting, setSubmitting] = useState(false);
  const [started, setStarted] = useState<Execution | null>(null);
  const [touched, setTouched] = useState<Touched>(() => new Set());
  const [prefillError, setPrefillError] = useState<unknown>(null);
  const schema = (tool?.inputSchema ?? {}) as Schema;

  const localErrors = useMemo(() => validate(schema, args), [schema, args]);
  const serverError = submitError ?? quoteError;
  const fieldErrors = useMemo(() => {
    if (localErrors.size > 0) return shownErrors(localErrors, touched);
    return serverError instanceof ApiError && serverError.body.message === 'invalid_arguments' ? serverFieldErrors(serverError.body.details) : localErrors;
  }, [localErrors, serverError, touched]);
  const argsKey = JSON.stringify(args);

  /**
   * A new input not typed by the person: an example, quiet until touched; or an earlier run's
   * (touched: 'all'), whose problems, if the tool changed since, are shown at once.
   */
  const start = (name: string, input: JsonObject, touched: Touched = new Set()) => {
    setToolName(name);
    setArgs(input);
    setTouched(touched);
    setStarted(null);
    setSubmitError(null);
  };
  const choose = (name: string) => {
    const next = catalog.tools.find((t) => t.name === name);
    start(name, next ? exampleOf(next) : {});
  };
  const edit = (next: JsonObject) => {
    setTouched((t) => touch(t, changedPointers(args, next)));
    setArgs(next);
  };

  // Run again: the tool and input of an earlier execution (the form's own key, so it is a new run).
  useEffect(() => {
    if (!props.from) return;
    setPrefillError(null);
    api.execution(props.from).then((e) => start(e.tool, e.arguments as JsonObject, 'all'), setPrefillError);
  }, [props.from]);

  // A live quote: the maximum that will be reserved, asked for once the input has settled.
  const seq = useRef(0);
  useEffect(() => {
    setQuote(null);
    setQuoteError(null);
    setSubmitError(null);
    if (!tool || localErrors.size > 0) return;
    const mine = ++seq.current;
    const abort = new AbortController();
    const timer = setTimeout(() => {
      setQuoting(true);
      api
        .quote(tool.name, args, abort.signal)
        .then((q) => mine === seq.current && setQuote({ quote: q, args: argsKey }))
        .catch((err: unknown) => mine === seq.current && !abort.signal.aborted && setQuoteError(err))
        .finally(() => mine === seq.current && setQuoting(false));
    }, QUOTE_DEBOUNCE_MS);
    return () => {
      clearTimeout(timer);
      abort.abort();
    };
  }, [toolName, argsKey]);

  // A run that starts moves the focus to its result (and so into view, on a phone below the form).
  useEffect(() => {
    if (started) document.getElementById('h-result')?.focus();
  }, [started?.id]);

  const canRun = !!tool && localErrors.size === 0 && quote?.args === argsKey && !submitting;
  const run = async () => {
    if (!tool || !quote || !canRun) return;
    setSubmitting(true);
    setSubmitError(null);
    try {
      setStarted(await api.submit(tool.name, args, quote.quote));
    } catch (err) {
      setSubmitError(err);
    } finally {
      setSubmitting(false);
    }
  };

  return (
    <div class="runner">
      <section class="panel form-panel" aria-labelledby="h-tool">
        <h2 id="h-tool">Try a tool</h2>
        {props.from && !prefillError && (
          <p class="note small">
            Filled in from <code>{props.from}</code>: change anything, then run it again.
          </p>
        )}
        {prefillError !== null && <ErrorBox error={prefillError} title="The earlier execution" />}
        <div class="field">
          <label for="tool-select">
            <span class="label">Tool</span>
          </label>
          <select id="tool-select" value={toolName} onChange={(e) => choose(e.currentTarget.value)}>
            {['image', 'audio', 'video', 'test']
              .concat([...new Set(catalog.tools.map((t) => t.category))])
              .filter((c, i, all) => all.indexOf(c) === i)
              .map((category) => {
                const tools = catalog.tools.filter((t) => t.category === category);
                return tools.length === 0 ? null : (
                  <optgroup key={category} label={category}>
                    {tools.map((t) => (
                      <option key={t.name} value={t.name}>
                        {t.name}
                        {t.available ? '' : ' (unavailable)'}
                        {t.price ? ` — ${t.price.description}` : ''}
                      </option>
                    ))}
                  </optgroup>
                );
              })}
          </select>
        </div>
        {tool && (
          <div class="tool-card">
            <p>{tool.description}</p>
            <p class="small">
              <span class={`badge ${tool.available ? 'status-succeeded' : 'status-failed'}`}>{tool.available ? 'available' : 'unavailable'}</span>{' '}
              <span class="muted">{tool.category}</span>
              {tool.price && <span class="muted"> · {tool.price.description}</span>}
            </p>
            {tool.models.length > 1 && (
              <ul class="models small">
                {tool.models.map((m) => (
                  <li key={m.id}>
                    <code>{m.id}</code> {m.available ? '' : <span class="muted">(unavailable)</span>} {m.price?.description ?? ''}{' '}
                    <button type="button" class="link" onClick={() => start(tool.name, exampleOf(tool, m.id))}>
                      use its example
                    </button>
                  </li>
                ))}
              </ul>
            )}
          </div>
        )}
        {tool && (
          <form
            noValidate
            onSubmit={(e) => {
              e.preventDefault();
              void run();
            }}
          >
            <SchemaForm schema={schema} value={args} errors={fieldErrors} upload={(f) => api.upload(f)} onChange={edit} />
            <div class="form-actions">
              <button type="button" class="secondary" onClick={() => start(tool.name, exampleOf(tool))}>
                Reset to the example
              </button>
            </div>
            <div class="quote" aria-live="polite" aria-busy={quoting}>
              {localErrors.size > 0 && (
                <p class="muted">
                  {fieldErrors.size > 0 ? 'Fix the fields marked above to get a quote.' : 'Fill in the fields marked required to get a quote.'}
                </p>
              )}
              {quoting && !quote && <p class="muted">Quoting…</p>}
              {quote?.args === argsKey && (
                <p class="quote-line">
                  Up to <strong class="quote-max">{usd(quote.quote.maximumChargeMicros)}</strong> will be reserved
                  <span class="muted">
                    {' '}
                    ({quote.quote.estimatedUnits} {quote.quote.unit}
                    {quote.quote.estimatedUnits === 1 ? '' : 's'}, at least {usd(quote.quote.minimumChargeMicros)}; you are charged what it costs; prices{' '}
                    {quote.quote.priceVersion})
                  </span>
                </p>
              )}
              {quoteError !== null && <ErrorBox error={quoteError} title="Quote" />}
            </div>
            <button type="submit" class="primary" disabled={!canRun}>
              {submitting ? 'Starting…' : 'Run'}
            </button>
            {!catalog.executionEnabled && <p class="note">Running tools is switched off on this deployment for now.</p>}
            {submitError !== null && <ErrorBox error={submitError} title="Run" />}
          </form>
        )}
      </section>
      <section class="panel result-panel" id="result-panel" aria-labelledby="h-result">
        <h2 id="h-result" tabIndex={-1}>
          Result
        </h2>
        {started ? (
          <ExecutionView
            key={started.id}
            api={api}
            id={started.id}
            initial={started}
            onEnded={(e) => {
              props.onEnded(e);
              showResult();
            }}
          />
        ) : (
          <p class="muted">Run the tool to see its progress, its cost and its output here.</p>
        )}
      </section>
      {tool && <CodePanel tool={tool.name} args={args} quote={quote?.args === argsKey ? quote.quote : null} />}
    </div>
  );
}
