import { gaugeOf, sandboxPortConnections } from '../util/metrics.js';
import { addCount } from '../util/count-map.js';

/** How many connections to sandboxes' ports the worker holds at once (sandboxes.ports). */
export interface PortConnectionLimits {
  /** Open at once to the ports of one sandbox. */
  maxPerSandbox: number;
  /** Open at once to the ports of all sandboxes of one API key (the service token's are not counted). */
  maxPerKey: number;
}

/** What a connection to a sandbox's port is: a request (HTTP) or an upgrade (a WebSocket, held both ways). */
export type PortConnectionKind = 'http' | 'upgrade';

/**
 * The connections open to sandboxes' ports, per sandbox and per API key. Each holds a socket
 * and its agent's buffers inside its sandbox and a socket here for as long as its client keeps it, so a client
 * that opens them without end would take the sandbox's processes and the worker's descriptors:
 * past its share a new one is refused at once (429), which costs the other sandboxes' traffic
 * nothing. Every connection is counted (agent_runner_sandbox_port_connections_total), and those
 * open now per sandbox are a gauge read when scraped.
 */
export class PortConnections {
  private readonly bySandbox = new Map<string, number>();
  private readonly byKey = new Map<string, number>();

  constructor(private readonly limits: PortConnectionLimits) {
    gaugeOf('agent_runner_sandbox_port_connections_open', "Connections open now to a sandbox's ports, by sandbox.", ['sandbox'], () =>
      [...this.bySandbox].map(([sandbox, open]) => [{ sandbox }, open]),
    );
  }

  /**
   * Counts a new connection to a port of the sandbox (made by the key named `apiKey`; undefined:
   * the service token): the function that ends it, or why it is refused.
   */
  open(sandboxId: string, apiKey: string | undefined, kind: PortConnectionKind): { close: () => void } | { refused: string } {
    const ofSandbox = this.bySandbox.get(sandboxId) ?? 0;
    const ofKey = apiKey === undefined ? 0 : (this.byKey.get(apiKey) ?? 0);
    let refused: string | null = null;
    if (ofSandbox >= this.limits.maxPerSandbox) refused = `sandbox ${sandboxId} has ${ofSandbox} connections to its ports open, the most it may; close one first`;
    else if (apiKey !== undefined && ofKey >= this.limits.maxPerKey) {
      refused = `the sandboxes of API key ${apiKey} have ${ofKey} connections to their ports open, the most they may; close one first`;
    }
    sandboxPortConnections.inc({ kind, outcome: refused === null ? 'opened' : 'limited' });
    if (refused !== null) return { refused };
    addCount(this.bySandbox, sandboxId, 1);
    if (apiKey !== undefined) addCount(this.byKey, apiKey, 1);
    let closed = false;
    return {
      close: () => {
        if (closed) return;
        closed = true;
        addCount(this.bySandbox, sandboxId, -1);
        if (apiKey !== undefined) addCount(this.byKey, apiKey, -1);
      },
    };
  }
}
