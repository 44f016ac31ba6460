/** Who holds a connection: the caller's project and organization. */
export interface Holder {
  projectId: string;
  organizationId: string;
}

/** A place taken: give it back once (later calls do nothing). */
export interface HeldPlace {
  release(): void;
}

/** Why a held connection was refused: the share that was full. */
export interface HeldRefusal {
  share: 'project' | 'organization' | 'process';
  limit: number;
}

/** What holds the place: an event stream or a `Prefer: wait` request. */
export type HeldKind = 'stream' | 'wait';

interface Place {
  holder: Holder;
  kind: HeldKind;
  /** Ends the connection early (a stream ends, a wait is answered with the state as it is). */
  preempt: () => void;
  released: boolean;
}

/**
 * The held connections of one gateway process (event streams and `Prefer: wait` requests),
 * each counted until it ends. Issue #25: one project with 21 keys opened 2,404 streams in
 * 4.9 s (RSS +52 MB); nothing bounded them.
 *
 * A new one is refused when its project holds `perProject`, its organization `perOrganization`
 * (its projects together), or the process `perProcess`. A full process does not refuse a
 * project that holds fewer than the largest holder minus one: the largest holder's oldest
 * connection is preempted (ended early, see Place.preempt) and its place given to the caller.
 * So while the process is full every holding project converges to an equal share of it (max-min
 * fairness) and no set of projects, however many keys they use, can keep another from its first
 * connection; only when every holder holds one is a newcomer refused.
 *
 * Keys are not counted apart: a project's keys are its own, and its share bounds them together
 * (the 21 keys above hold no more than one would).
 *
 * The counts are this process's only: with several gateway replicas (or GATEWAY_PROCESSES) each
 * has the same shares of its own.
 */
export class HeldConnections {
  private readonly byProject = new Map<string, Set<Place>>();
  private readonly byOrganization = new Map<string, number>();
  private count = 0;

  constructor(
    readonly shares: { perProcess: number; perOrganization: number; perProject: number },
    /** Told of each refusal and preemption (the gateway counts them: tes_fair_share_total). */
    private readonly observe: (kind: HeldKind, outcome: 'refused' | 'preempted') => void = () => undefined,
  ) {}

  get held(): number {
    return this.count;
  }

  /** How many connections `projectId` holds in this process. */
  heldBy(projectId: string): number {
    return this.byProject.get(projectId)?.size ?? 0;
  }

  /**
   * Takes a place for a connection of `holder`, or tells which share is full. `preempt` is
   * called (at most once, and the place is already given back then) when a project holding
   * less needs the place; it must end the connection without waiting.
   */
  take(holder: Holder, kind: HeldKind, preempt: () => void): HeldPlace | HeldRefusal {
    const refusal = this.refusal(holder);
    if (refusal) {
      this.observe(kind, 'refused');
      return refusal;
    }
    const place: Place = { holder, kind, preempt, released: false };
    let places = this.byProject.get(holder.projectId);
    if (!places) this.byProject.set(holder.projectId, (places = new Set()));
    places.add(place);
    this.byOrganization.set(holder.organizationId, (this.byOrganization.get(holder.organizationId) ?? 0) + 1);
    this.count += 1;
    return { release: () => this.give(place) };
  }

  /** Which share `holder` is beyond; none when it may hold one more (after a preemption if the process is full). */
  private refusal(holder: Holder): HeldRefusal | undefined {
    const { perProcess, perOrganization, perProject } = this.shares;
    const mine = this.heldBy(holder.projectId);
    if (mine >= perProject) return { share: 'project', limit: perProject };
    if ((this.byOrganization.get(holder.organizationId) ?? 0) >= perOrganization) return { share: 'organization', limit: perOrganization };
    if (this.count < perProcess) return undefined;
    const victim = this.oldestOfLargest(mine);
    if (!victim) return { share: 'process', limit: perProcess };
    this.give(victim);
    this.observe(victim.kind, 'preempted');
    victim.preempt();
    return undefined;
  }

  /**
   * The oldest connection of the project holding the most, if it holds at least two more than
   * the caller (`mine`): taking one from a project holding just one more would only swap them.
   * O(projects holding), at most perProcess.
   */
  private oldestOfLargest(mine: number): Place | undefined {
    let largest: Set<Place> | undefined;
    for (const places of this.byProject.values()) if (!largest || places.size > largest.size) largest = places;
    if (!largest || largest.size < mine + 2) return undefined;
    // a Set iterates in insertion order: the first is the oldest
    return largest.values().next().value;
  }

  private give(place: Place): void {
    if (place.released) return;
    place.released = true;
    const { projectId, organizationId } = place.holder;
    const places = this.byProject.get(projectId);
    places?.delete(place);
    if (places?.size === 0) this.byProject.delete(projectId);
    const n = (this.byOrganization.get(organizationId) ?? 1) - 1;
    if (n > 0) this.byOrganization.set(organizationId, n);
    else this.byOrganization.delete(organizationId);
    this.count -= 1;
  }
}

export function isRefusal(taken: HeldPlace | HeldRefusal): taken is HeldRefusal {
  return 'share' in taken;
}
