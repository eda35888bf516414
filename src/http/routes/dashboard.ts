import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import { fileURLToPath } from 'node:url';

/** ui/ at the package root: three levels up from src/http/routes/ and from dist/http/routes/ alike. */
const UI_ROOT = fileURLToPath(new URL('../../../ui/', import.meta.url));

const PREFIX = '/ui';

/**
 * The page's own files and nothing else: no inline script or style, no other origin, no
 * framing, no form posted anywhere (a form the script did not take over would put the token in
 * a URL). Trusted Types make an innerHTML assignment throw, so job output, which whoever
 * submitted the job wrote, can only ever reach the page as text.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

/**
 * The dashboard's files are served without the token: they hold no data, only the page that
 * asks for it and sends it on every API call (docs/http-api.md "Dashboard").
 */
export function isDashboardRoute(url: string): boolean {
  return url === PREFIX || url.startsWith(`${PREFIX}/`);
}

/** The dashboard at /ui/: static files read from ui/ once at start (a file added later is not served). */
export function dashboardRoutes() {
  return async (app: FastifyInstance) => {
    // In this plugin's scope, so only the dashboard's answers carry it.
    app.addHook('onSend', async (_request, reply) => {
      reply.header('Content-Security-Policy', CONTENT_SECURITY_POLICY).header('X-Content-Type-Options', 'nosniff').header('Referrer-Policy', 'no-referrer');
    });
    await app.register(fastifyStatic, { root: UI_ROOT, prefix: `${PREFIX}/`, wildcard: false, decorateReply: false });
    // Relative, so the page's own relative URLs resolve under /ui/ behind a proxy's path prefix too.
    app.get(PREFIX, { schema: { hide: true } }, (_request, reply) => reply.redirect('ui/', 301));
  };
}
