import type { Project, Usage } from '../api';
import { usd } from '../format';

/**
 * Who is signed in and where the money stands: balance, reservations, this month's usage.
 * A key without project:read (project null) sees neither the project nor its balance.
 */
export function AccountBar(props: { project: Project | null; usage: Usage | null; onSignOut: () => void }) {
  const { project, usage } = props;
  return (
    <div class="account" aria-label="Project">
      {project ? (
        <div class="who">
          <strong>{project.project.name}</strong>
          <span class="muted small">
            {project.organization.name} · key {project.key.name} ({project.key.role.toLowerCase()})
          </span>
        </div>
      ) : (
        <div class="who">
          <strong>Signed in</strong>
          <span class="muted small">
            Balance hidden: this key has no <code>project:read</code> scope
          </span>
        </div>
      )}
      <dl class="figures">
        {project && (
          <>
            <div>
              <dt>Available</dt>
              <dd data-figure="available">{usd(project.balance.availableMicros)}</dd>
            </div>
            <div>
              <dt>Reserved</dt>
              <dd data-figure="reserved">{usd(project.balance.reservedMicros)}</dd>
            </div>
          </>
        )}
        {usage && (
          <div>
            <dt>This month</dt>
            <dd data-figure="month">
              {usd(usage.chargedMicros)}
              <span class="muted small">
                {' '}
                · {usage.executionCount} run{usage.executionCount === 1 ? '' : 's'}
                {usage.monthlyCapMicros !== null ? ` · cap ${usd(usage.monthlyCapMicros)}` : ''}
              </span>
            </dd>
          </div>
        )}
      </dl>
      <button type="button" class="small secondary" onClick={props.onSignOut}>
        Sign out
      </button>
    </div>
  );
}
