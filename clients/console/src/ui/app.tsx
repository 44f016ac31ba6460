import { useEffect, useMemo, useState } from 'preact/hooks';
import { Api, ApiError, type Catalog, type Project, type Usage } from '../api';
import { AccountBar } from './account';
import { ErrorBox } from './error-box';
import { ExecutionView } from './execution-view';
import { ExecutionsList } from './executions-list';
import { ToolRunner } from './tool-runner';
import { WebhooksPage } from './webhooks-page';

/** The key lives in this tab's sessionStorage only: gone when the tab closes, never in a URL or a cookie. */
const KEY_SLOT = 'tes.console.apiKey';

type Route = { page: 'run'; from?: string } | { page: 'executions' } | { page: 'execution'; id: string } | { page: 'webhooks' };

function routeOf(hash: string): Route {
  const m = /^#executions\/(exe_[A-Za-z0-9]+)$/.exec(hash);
  if (m) return { page: 'execution', id: m[1]! };
  const again = /^#run\/(exe_[A-Za-z0-9]+)$/.exec(hash);
  if (again) return { page: 'run', from: again[1]! };
  if (hash === '#webhooks') return { page: 'webhooks' };
  return hash === '#executions' ? { page: 'executions' } : { page: 'run' };
}

/**
 * The project as this key may see it: null for a key without project:read, which works for
 * everything else and simply does not see the balance (its 403 proves the key is valid).
 */
async function projectOf(api: Api): Promise<Project | null> {
  try {
    return await api.project();
  } catch (err) {
    if (err instanceof ApiError && err.body.message === 'platform_api_key_scope_required') return null;
    throw err;
  }
}

export function App() {
  const [key, setKey] = useState<string | null>(() => sessionStorage.getItem(KEY_SLOT));
  const api: Api | null = useMemo(() => (key ? new Api(key) : null), [key]);
  // undefined until known; null when the key may not read it
  const [project, setProject] = useState<Project | null | undefined>(undefined);
  const [usage, setUsage] = useState<Usage | null>(null);
  const [catalog, setCatalog] = useState<Catalog | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [route, setRoute] = useState<Route>(() => routeOf(location.hash));

  useEffect(() => {
    const onHash = () => setRoute(routeOf(location.hash));
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);

  const refreshAccount = () => {
    if (!api) return;
    if (project !== null) projectOf(api).then(setProject, setError);
    api.usage().then(setUsage, () => setUsage(null));
  };

  useEffect(() => {
    if (!api) return;
    setError(null);
    refreshAccount();
    api.catalog().then(setCatalog, setError);
  }, [api]);

  const signOut = () => {
    sessionStorage.removeItem(KEY_SLOT);
    setKey(null);
    setProject(undefined);
    setUsage(null);
    setCatalog(null);
  };

  if (!api) {
    return (
      <SignIn
        onKey={(k, p) => {
          sessionStorage.setItem(KEY_SLOT, k);
          setProject(p);
          setKey(k);
        }}
      />
    );
  }

  const go = (hash: string) => {
    location.hash = hash;
  };
  return (
    <>
      <header class="top">
        <div class="brand">
          <span class="logo" aria-hidden="true">
            T
          </span>
          <span>
            Tool Execution Service <span class="muted">Console</span>
          </span>
        </div>
        {project !== undefined && <AccountBar project={project} usage={usage} onSignOut={signOut} />}
      </header>
      <nav class="tabs" aria-label="Sections">
        <a href="#run" aria-current={route.page === 'run' ? 'page' : undefined}>
          Run a tool
        </a>
        <a href="#executions" aria-current={route.page === 'executions' || route.page === 'execution' ? 'page' : undefined}>
          Executions
        </a>
        <a href="#webhooks" aria-current={route.page === 'webhooks' ? 'page' : undefined}>
          Webhooks
        </a>
        <a href="/docs">API reference</a>
      </nav>
      <main>
        {error !== null && <ErrorBox error={error} />}
        {project === undefined && error === null && <p class="muted">Loading…</p>}
        {catalog && route.page === 'run' && (
          <ToolRunner key={route.from ?? ''} api={api} catalog={catalog} {...(route.from ? { from: route.from } : {})} onEnded={refreshAccount} />
        )}
        {catalog && route.page === 'executions' && <ExecutionsList api={api} catalog={catalog} open={(id) => go(`executions/${id}`)} />}
        {project && route.page === 'webhooks' && <WebhooksPage api={api} project={project} />}
        {route.page === 'execution' && (
          <section class="panel">
            <p>
              <a href="#executions">← All executions</a>
            </p>
            <ExecutionView key={route.id} api={api} id={route.id} onEnded={refreshAccount} detail />
          </section>
        )}
      </main>
    </>
  );
}

function SignIn(props: { onKey: (key: string, project: Project | null) => void }) {
  const [value, setValue] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async () => {
    setBusy(true);
    setError(null);
    try {
      const key = value.trim();
      props.onKey(key, await projectOf(new Api(key)));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <div class="panel">
        <div class="brand">
          <span class="logo" aria-hidden="true">
            T
          </span>
          <span>
            Tool Execution Service <span class="muted">Console</span>
          </span>
        </div>
        <h1>Try any tool, watch it run, see where the money went</h1>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void submit();
          }}
        >
          <div class="field">
            <label for="api-key">
              <span class="label">API key</span>
            </label>
            <input
              id="api-key"
              type="password"
              autocomplete="off"
              spellcheck={false}
              placeholder="tes_…"
              required
              aria-describedby="api-key-hint"
              value={value}
              onInput={(e) => setValue(e.currentTarget.value)}
            />
            <p class="hint" id="api-key-hint">
              A project key (<code>npm start</code> prints one). It stays in this tab only and is sent only to this service, as the Authorization header.
            </p>
          </div>
          <button type="submit" class="primary" disabled={busy || value.trim() === ''}>
            {busy ? 'Signing in…' : 'Sign in'}
          </button>
        </form>
        {error !== null && <ErrorBox error={error} title="Sign in" />}
        <p class="muted small">
          The API reference is at <a href="/docs">/docs</a>.
        </p>
      </div>
    </main>
  );
}
