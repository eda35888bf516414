/**
 * The tenant rule (docs/security.md, Tenants): every object (run job, session, sandbox, paused
 * sandbox, snapshot) belongs to the API key that made it (service.apiKeys), by the key's name;
 * undefined is the service token's. A key sees only its own; the service token sees all.
 * `viewer` is who asks, in the same terms: undefined, the service token.
 */
export function visibleTo(viewer: string | undefined, owner: string | undefined): boolean {
  return viewer === undefined || owner === viewer;
}
