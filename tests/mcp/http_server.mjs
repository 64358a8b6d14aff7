#!/usr/bin/env node
// http_server.mjs: a real MCP server over Streamable HTTP, served by the official TypeScript
// SDK's own transports, with an optional OAuth 2.1 authorization server on the same origin
// (the 1.x SDK's auth router and bearer middleware, with the in-memory provider below).
// A test peer for meithd's remote MCP sources (Streamable HTTP, OAuth 2.1).
//
//   node http_server.mjs [--sdk=1|2] [--port=N] [--auth] [--token-ttl=S] [--redirect-to=URL]
//                        [--legacy=stateless|session|reject] [--ignore-eof]
//                        [--host=ADDR] [--tls-cert=PEM --tls-key=PEM]
//
//   --sdk=1 (default)   @modelcontextprotocol/sdk 1.x: McpServer + StreamableHTTPServerTransport,
//                       stateful (Mcp-Session-Id; a GET opens the session's SSE stream; DELETE
//                       ends it), resumable (an in-memory EventStore: Last-Event-ID on a GET
//                       replays what a stream missed). Protocol 2025-11-25 and older.
//   --sdk=2             @modelcontextprotocol/server 2.x: createMcpHandler, which serves
//                       2026-07-28 (per-request _meta envelope, MCP-Protocol-Version and
//                       Mcp-Method headers, server/discover) statelessly, and 2025-era traffic
//                       (initialize) as --legacy says:
//     --legacy=stateless (default, the SDK's own default): each 2025 POST on a fresh server
//                       and transport, no session id; GET and DELETE answer 405.
//     --legacy=session  2025 traffic to a sessionful 2.x WebStandardStreamableHTTPServerTransport
//                       (session ids, GET stream, Last-Event-ID) routed with isLegacyRequest().
//     --legacy=reject   modern only: an initialize gets 400 with the supported versions.
//   --port=N            127.0.0.1:N (default 0: any free port)
//   --auth              /mcp needs `Authorization: Bearer <token>` from the built-in
//                       authorization server (below)
//   --token-ttl=S       access tokens live S seconds (default 3600; `expires_in` says so)
//   --redirect-to=URL   every request to /mcp is answered 307 Location: URL (nothing else)
//   --ignore-eof        keep running when stdin closes (for running it by hand with `&`)
//   --fail-first=N      the first N requests to /mcp get 503 (a transient failure to retry)
//   --prm-resource=URL  the protected-resource metadata names URL as its `resource` (a server
//                       that would have the user log in for another resource)         (--auth)
//   --client=ID:SECRET  a client registered by hand, confidential (client_secret_post, the
//                       only method the SDK's token endpoint takes); it may also ask for a
//                       token for itself (grant_type=client_credentials: no refresh token;
//                       not listed in the metadata, which is the SDK's)               (--auth)
//   --host=ADDR         listen on ADDR (default 127.0.0.1; the URLs it prints and names use it)
//   --tls-cert=PEM, --tls-key=PEM
//                       serve HTTPS with this certificate (tests/mcp/tls: a test CA's
//                       certificate for 127.0.0.1, localhost and 203.0.113.5)
//
// Once listening it prints exactly one line on stdout: `listening http://127.0.0.1:PORT/mcp`.
// Everything else goes to stderr. It exits 0 on SIGTERM/SIGINT and when stdin closes.
//
// Endpoints (ORIGIN = http://127.0.0.1:PORT):
//   POST/GET/DELETE /mcp                           the MCP endpoint
//   GET  /.well-known/oauth-protected-resource/mcp RFC 9728 metadata: resource ORIGIN/mcp,
//                                                  authorization_servers [ORIGIN/]      (--auth)
//   GET  /.well-known/oauth-authorization-server   RFC 8414 metadata, issuer ORIGIN/     (--auth)
//   POST /register                                 RFC 7591 dynamic client registration  (--auth)
//   GET|POST /authorize                            auto-approves: 302 to redirect_uri?code&state
//   POST /token                                    authorization_code (PKCE S256) and
//                                                  refresh_token (rotated); form-encoded  (--auth)
//   POST /revoke                                   RFC 7009 revocation                   (--auth)
//   POST /admin/revoke   every access and refresh token revoked (a refresh then gets invalid_grant)
//   POST /admin/expire   every current access token expires now (refresh tokens stay good)
//   GET  /admin/stats    {tokensIssued, refreshes, unauthorized, mcpRequests,
//                         authorizationHeaders: the last 20 Authorization values seen on /mcp,
//                         failed (503s of --fail-first), cuts, sessionsDropped, deletes, gets,
//                         headers: the last X-Api-Key, MCP-Protocol-Version, Mcp-Method, Mcp-Name,
//                         openPosts: POSTs to /mcp whose answer is still open,
//                         authorizeRequests: GET|POST /authorize seen, tokenRequests: [{client_id,
//                         secret: whether the right client_secret came}] of POST /token}
//   POST /admin/cut      destroys every SSE answer to a POST in flight (resumption test)
//   POST /admin/drop-sessions  forgets every session (1.x): the next request with one gets 404
//
// Tools: echo {text} → text; add {a,b} → the sum as text; whoami → "authorized" when the
// request carried a verified token, "anonymous" otherwise (never the token); slow {ms} →
// notifications/progress (when the call has a progressToken) then "done" after ms; grow →
// registers the tool `grown` (so the server sends notifications/tools/list_changed); hang →
// never answers and ignores cancellation.
// Resource: test://static → "static resource".
import http from 'node:http';
import https from 'node:https';
import fs from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import express from 'express';
import * as z from 'zod/v4';
import { getRequestListener } from '@hono/node-server';
import { mcpAuthRouter, getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidGrantError, InvalidScopeError, InvalidTargetError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';

// Only the listening line goes to stdout: whatever the SDKs log goes to stderr.
console.log = console.info = console.debug = (...a) => console.error(...a);
const log = (...a) => console.error('[http_server]', ...a);

const flags = new Map();
for (const a of process.argv.slice(2)) {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    if (!m) { log(`unknown argument ${a}`); process.exit(2); }
    flags.set(m[1], m[2] ?? true);
}
const known = ['sdk', 'port', 'auth', 'token-ttl', 'redirect-to', 'legacy', 'ignore-eof', 'host',
               'tls-cert', 'tls-key', 'fail-first', 'prm-resource', 'client'];
for (const k of flags.keys()) if (!known.includes(k)) { log(`unknown option --${k}`); process.exit(2); }
const SDK = String(flags.get('sdk') ?? '1');
const PORT = Number(flags.get('port') ?? 0);
const AUTH = flags.has('auth');
const TOKEN_TTL = Number(flags.get('token-ttl') ?? 3600);
const REDIRECT_TO = flags.get('redirect-to');
const LEGACY = String(flags.get('legacy') ?? 'stateless');
const HOST = String(flags.get('host') ?? '127.0.0.1');
const TLS = flags.has('tls-cert')
    ? { cert: fs.readFileSync(String(flags.get('tls-cert'))), key: fs.readFileSync(String(flags.get('tls-key'))) }
    : undefined;
if (!['1', '2'].includes(SDK) || !(TOKEN_TTL > 0) || !['stateless', 'session', 'reject'].includes(LEGACY)) {
    log('bad --sdk, --token-ttl or --legacy'); process.exit(2);
}

const FAIL_FIRST = Number(flags.get('fail-first') ?? 0);
const PRM_RESOURCE = flags.get('prm-resource');
const CLIENT = flags.has('client') ? String(flags.get('client')).split(':') : undefined;
const stats = { authorizeRequests: 0, tokenRequests: [], tokensIssued: 0, refreshes: 0, unauthorized: 0, mcpRequests: 0, authorizationHeaders: [],
                failed: 0, cuts: 0, sessionsDropped: 0, deletes: 0, gets: 0, headers: {} };
const openPosts = new Set(); // /mcp POST responses in flight (for /admin/cut)
const dropSessions = [];     // how each SDK endpoint forgets its sessions (/admin/drop-sessions)
const sleep = (ms, signal) => new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

// ------------------------------------------------------------------------------------------
// The MCP server: the same tools on either SDK. `ctx` maps the handler's extra argument (1.x:
// RequestHandlerExtra; 2.x: ServerContext) onto what the tools need.

const v1ctx = (extra) => ({ progressToken: extra?._meta?.progressToken, notify: (n) => extra.sendNotification(n),
                            signal: extra?.signal, authInfo: extra?.authInfo });
const v2ctx = (ctx) => ({ progressToken: ctx?.mcpReq?._meta?.progressToken, notify: (n) => ctx.mcpReq.notify(n),
                          signal: ctx?.mcpReq?.signal, authInfo: ctx?.http?.authInfo });

function buildServer(McpServer, toCtx) {
    const server = new McpServer({ name: 'meith-http-test', version: '1.0.0' },
                                 { capabilities: { tools: {}, resources: {} } });
    const text = (t) => ({ content: [{ type: 'text', text: t }] });
    server.registerTool('echo', { description: 'Echoes text', inputSchema: z.object({ text: z.string() }),
                                  annotations: { readOnlyHint: true } },
                        async ({ text: t }) => text(t));
    server.registerTool('add', { description: 'Adds two numbers', inputSchema: z.object({ a: z.number(), b: z.number() }),
                                 annotations: { readOnlyHint: true } },
                        async ({ a, b }) => text(String(a + b)));
    server.registerTool('whoami', { description: '"authorized" when the request carried a verified token',
                                    inputSchema: z.object({}), annotations: { readOnlyHint: true } },
                        async (_args, extra) => text(toCtx(extra).authInfo ? 'authorized' : 'anonymous'));
    server.registerTool('slow', { description: 'Reports progress, answers "done" after ms',
                                  inputSchema: z.object({ ms: z.number() }), annotations: { readOnlyHint: true } },
                        async ({ ms }, extra) => {
                            const c = toCtx(extra);
                            const steps = 4;
                            for (let i = 0; i <= steps; i++) {
                                if (c.signal?.aborted) break;
                                if (c.progressToken !== undefined)
                                    await c.notify({ method: 'notifications/progress',
                                                     params: { progressToken: c.progressToken, progress: i, total: steps } });
                                if (i < steps) await sleep(ms / steps, c.signal);
                            }
                            return text('done');
                        });
    server.registerTool('hang', { description: 'Never answers, and ignores cancellation (a hostile server)',
                                  inputSchema: z.object({}), annotations: { readOnlyHint: true } },
                        () => new Promise(() => {}));
    server.registerTool('grow', { description: 'Registers the tool "grown" (a tools/list_changed notification)',
                                  inputSchema: z.object({}), annotations: { readOnlyHint: true } },
                        async () => {
                            server.registerTool('grown', { description: 'Added at run time', inputSchema: z.object({}),
                                                           annotations: { readOnlyHint: true } },
                                                async () => text('grown'));
                            return text('grew');
                        });
    server.registerResource('static', 'test://static', { mimeType: 'text/plain', description: 'A static resource' },
                            async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'static resource' }] }));
    return server;
}

/// Resumability: every SSE event of a session, by stream, in order. Event ids are
/// `<streamId>_<seq>` with seq increasing per store, so a replay is "after seq, same stream".
class EventStore {
    constructor(limit = 2000) { this.limit = limit; this.seq = 0; this.byId = new Map(); this.streams = new Map(); }
    async storeEvent(streamId, message) {
        const seq = ++this.seq;
        const eventId = `${streamId}_${seq}`;
        const list = this.streams.get(streamId) ?? [];
        list.push({ eventId, seq, message });
        if (list.length > this.limit) this.byId.delete(list.shift().eventId);
        this.streams.set(streamId, list);
        this.byId.set(eventId, { streamId, seq });
        return eventId;
    }
    async getStreamIdForEventId(eventId) { return this.byId.get(eventId)?.streamId; }
    async replayEventsAfter(lastEventId, { send }) {
        const at = this.byId.get(lastEventId);
        if (!at) return '';
        for (const e of this.streams.get(at.streamId) ?? [])
            if (e.seq > at.seq && Object.keys(e.message).length > 0) await send(e.eventId, e.message); // not the priming events
        return at.streamId;
    }
}

// ------------------------------------------------------------------------------------------
// The authorization server's provider (the SDK's OAuthServerProvider interface): clients,
// codes and tokens in memory. The SDK's handlers check client auth, PKCE S256 and the
// registered redirect_uri (any port for a loopback one, RFC 8252 §7.3); this checks the rest.

class ClientsStore {
    constructor() { this.clients = new Map(); }
    async getClient(id) { return this.clients.get(id); }
    async registerClient(client) { this.clients.set(client.client_id, client); return client; }
}

class TestOAuthProvider {
    constructor(resourceUrl) {
        this.resource = new URL(resourceUrl);
        this.clientsStore = new ClientsStore();
        this.codes = new Map();    // code → {clientId, params, expiresAt}
        this.access = new Map();   // token → {clientId, scopes, expiresAt (ms)}
        this.refresh = new Map();  // token → {clientId, scopes}
    }
    checkResource(resource) {      // RFC 8707: when given, it must name this server
        if (resource !== undefined && new URL(resource).href !== this.resource.href)
            throw new InvalidTargetError(`resource must be ${this.resource.href}`);
    }
    async authorize(client, params, res) {
        this.checkResource(params.resource);  // thrown errors are redirected by the SDK's handler
        const code = randomBytes(18).toString('base64url');
        this.codes.set(code, { clientId: client.client_id, params, expiresAt: Date.now() + 120_000 });
        const to = new URL(params.redirectUri);
        to.searchParams.set('code', code);
        if (params.state !== undefined) to.searchParams.set('state', params.state);
        res.redirect(302, to.href);
    }
    code(client, code) {
        const rec = this.codes.get(code);
        if (!rec || rec.clientId !== client.client_id || rec.expiresAt < Date.now())
            throw new InvalidGrantError('invalid authorization code');
        return rec;
    }
    async challengeForAuthorizationCode(client, code) { return this.code(client, code).params.codeChallenge; }
    async exchangeAuthorizationCode(client, code, _verifier, redirectUri, resource) {
        const rec = this.code(client, code);
        this.codes.delete(code);  // one use only
        if (redirectUri !== undefined && redirectUri !== rec.params.redirectUri)
            throw new InvalidGrantError('redirect_uri differs from the authorization request');
        this.checkResource(resource);
        return this.issue(client.client_id, rec.params.scopes ?? []);
    }
    async exchangeRefreshToken(client, refreshToken, scopes, resource) {
        const rec = this.refresh.get(refreshToken);
        if (!rec || rec.clientId !== client.client_id) throw new InvalidGrantError('refresh token is invalid or revoked');
        this.checkResource(resource);
        if (scopes && !scopes.every((s) => rec.scopes.includes(s))) throw new InvalidScopeError('scope exceeds the grant');
        this.refresh.delete(refreshToken);  // rotation: the old refresh token is spent
        stats.refreshes++;
        return this.issue(client.client_id, scopes ?? rec.scopes);
    }
    issue(clientId, scopes) {
        const accessToken = `at_${randomBytes(24).toString('base64url')}`;
        const refreshToken = `rt_${randomBytes(24).toString('base64url')}`;
        this.access.set(accessToken, { clientId, scopes, expiresAt: Date.now() + TOKEN_TTL * 1000 });
        this.refresh.set(refreshToken, { clientId, scopes });
        stats.tokensIssued++;
        return { access_token: accessToken, token_type: 'Bearer', expires_in: TOKEN_TTL, refresh_token: refreshToken,
                 ...(scopes.length && { scope: scopes.join(' ') }) };
    }
    async verifyAccessToken(token) {
        const rec = this.access.get(token);
        if (!rec) throw new InvalidTokenError('Invalid or revoked access token');
        if (rec.expiresAt <= Date.now()) throw new InvalidTokenError('Token has expired');
        return { token, clientId: rec.clientId, scopes: rec.scopes, expiresAt: Math.floor(rec.expiresAt / 1000),
                 resource: this.resource };
    }
    async revokeToken(client, { token }) {
        for (const map of [this.access, this.refresh])
            if (map.get(token)?.clientId === client.client_id) map.delete(token);
    }
    revokeAll() { this.access.clear(); this.refresh.clear(); }
    expireAll() { for (const rec of this.access.values()) rec.expiresAt = Date.now() - 1000; }
}

// ------------------------------------------------------------------------------------------
// The MCP endpoint on each SDK. Both take the Node request (with req.auth set by the bearer
// middleware when --auth) and answer on res.

const closers = [];

async function sdk1Endpoint() {
    const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
    const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
    const { isInitializeRequest } = await import('@modelcontextprotocol/sdk/types.js');
    const sessions = new Map();  // Mcp-Session-Id → transport
    closers.push(() => Promise.all([...sessions.values()].map((t) => t.close().catch(() => {}))));
    dropSessions.push(() => { for (const t of sessions.values()) t.close().catch(() => {}); sessions.clear(); });
    const json = express.json({ limit: '4mb' });
    const handle = async (req, res) => {
        const sid = req.headers['mcp-session-id'];
        let transport = sid ? sessions.get(sid) : undefined;
        if (sid && !transport)
            return res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
        if (!transport) {
            if (req.method !== 'POST' || !isInitializeRequest(req.body))
                return res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
            transport = new StreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                eventStore: new EventStore(),
                onsessioninitialized: (id) => { sessions.set(id, transport); log(`session ${id} opened`); },
            });
            transport.onclose = () => { if (transport.sessionId && sessions.delete(transport.sessionId)) log(`session ${transport.sessionId} closed`); };
            await buildServer(McpServer, v1ctx).connect(transport);
        }
        await transport.handleRequest(req, res, req.body);
    };
    return (req, res, next) => json(req, res, (err) => (err ? next(err) : handle(req, res).catch(next)));
}

async function sdk2Endpoint() {
    const { McpServer, createMcpHandler, isLegacyRequest, WebStandardStreamableHTTPServerTransport, isInitializeRequest } =
        await import('@modelcontextprotocol/server');
    const factory = () => buildServer(McpServer, v2ctx);
    const handler = createMcpHandler(factory, { legacy: LEGACY === 'stateless' ? 'stateless' : 'reject',
                                                onerror: (e) => log('mcp handler:', e.message) });
    closers.push(() => handler.close());

    // --legacy=session: 2025 traffic to sessionful 2.x transports, as isLegacyRequest's docs show.
    const sessions = new Map();
    closers.push(() => Promise.all([...sessions.values()].map((t) => t.close().catch(() => {}))));
    const legacySession = async (request, authInfo) => {
        const sid = request.headers.get('mcp-session-id');
        let transport = sid ? sessions.get(sid) : undefined;
        if (sid && !transport)
            return Response.json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }, { status: 404 });
        let parsedBody;
        if (request.method === 'POST') parsedBody = await request.clone().json().catch(() => undefined);
        if (!transport) {
            if (request.method !== 'POST' || !isInitializeRequest(parsedBody))
                return Response.json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null }, { status: 400 });
            transport = new WebStandardStreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                eventStore: new EventStore(),
                onsessioninitialized: (id) => { sessions.set(id, transport); log(`session ${id} opened`); },
            });
            transport.onclose = () => { if (transport.sessionId && sessions.delete(transport.sessionId)) log(`session ${transport.sessionId} closed`); };
            await factory().connect(transport);
        }
        return transport.handleRequest(request, { authInfo });
    };
    const serve = async (request, authInfo) => {
        if (LEGACY === 'session' && await isLegacyRequest(request)) return legacySession(request, authInfo);
        return handler.fetch(request, { authInfo });
    };
    // Node req/res ↔ web Request/Response the way the 1.x SDK's own Node transport does it.
    return (req, res, next) => getRequestListener((request) => serve(request, req.auth), { overrideGlobalObjects: false })(req, res)
        .catch(next);
}

// ------------------------------------------------------------------------------------------
// The HTTP server: listen first (the port is part of every URL the metadata names), then route.

const server = TLS ? https.createServer(TLS) : http.createServer();
server.listen(PORT, HOST, async () => {
    try {
        const origin = `${TLS ? 'https' : 'http'}://${HOST}:${server.address().port}`;
        const mcpUrl = new URL(`${origin}/mcp`);
        const app = express();
        app.disable('x-powered-by');
        app.set('etag', false);
        app.use((req, res, next) => {
            res.on('finish', () => { if (res.statusCode === 401) stats.unauthorized++; });
            next();
        });

        const provider = AUTH ? new TestOAuthProvider(mcpUrl) : undefined;
        app.post('/admin/revoke', (req, res) => { provider?.revokeAll(); res.json({ ok: true }); });
        app.post('/admin/expire', (req, res) => { provider?.expireAll(); res.json({ ok: true }); });
        app.get('/admin/stats', (req, res) => res.json({ ...stats, openPosts: openPosts.size }));
        // Cuts every SSE answer to a POST in flight (the client resumes with Last-Event-ID).
        app.post('/admin/cut', (req, res) => {
            let n = 0;
            // The SDK writes its SSE head with writeHead (getHeader does not see it): a POST whose
            // head went out and that is still open is a stream in flight.
            for (const r of openPosts)
                if (r.headersSent && !r.writableEnded) { r.socket?.destroy(); n++; }
            stats.cuts += n;
            res.json({ ok: true, cut: n });
        });
        // Forgets every session: the next request with its id gets 404 (the client starts anew).
        app.post('/admin/drop-sessions', (req, res) => {
            for (const d of dropSessions) d();
            stats.sessionsDropped++;
            res.json({ ok: true });
        });

        if (AUTH && CLIENT)
            await provider.clientsStore.registerClient({
                client_id: CLIENT[0], client_secret: CLIENT[1], client_id_issued_at: 0,
                redirect_uris: ['http://127.0.0.1/callback'], token_endpoint_auth_method: 'client_secret_post',
                grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] });
        if (AUTH) {
            app.use('/authorize', (req, res, next) => { stats.authorizeRequests++; next(); });
            app.post('/token', express.urlencoded({ extended: false }), (req, res, next) => {
                stats.tokenRequests.push({ client_id: req.body?.client_id,
                                           secret: CLIENT !== undefined && req.body?.client_secret === CLIENT[1] });
                next();
            });
            if (CLIENT)
                app.post('/token', (req, res, next) => {
                    if (req.body?.grant_type !== 'client_credentials') return next();
                    if (req.body.client_id !== CLIENT[0] || req.body.client_secret !== CLIENT[1])
                        return res.status(401).json({ error: 'invalid_client' });
                    const { refresh_token: _none, ...token } = provider.issue(CLIENT[0], []);
                    res.json(token);
                });
            if (PRM_RESOURCE)
                app.get('/.well-known/oauth-protected-resource/mcp', (req, res) =>
                    res.json({ resource: PRM_RESOURCE, authorization_servers: [`${origin}/`] }));
            app.use(mcpAuthRouter({
                provider,
                issuerUrl: new URL(origin),
                resourceServerUrl: mcpUrl,
                resourceName: 'meith HTTP test server',
                authorizationOptions: { rateLimit: false },
                tokenOptions: { rateLimit: false },
                clientRegistrationOptions: { rateLimit: false },
                revocationOptions: { rateLimit: false },
            }));
        }

        const mcp = [(req, res, next) => {
            stats.mcpRequests++;
            if (req.headers.authorization !== undefined) {
                stats.authorizationHeaders.push(req.headers.authorization);
                if (stats.authorizationHeaders.length > 20) stats.authorizationHeaders.shift();
            }
            for (const h of ['x-api-key', 'mcp-protocol-version', 'mcp-method', 'mcp-name'])
                if (req.headers[h] !== undefined) stats.headers[h] = req.headers[h];
            if (req.method === 'DELETE') stats.deletes++;
            if (req.method === 'GET') stats.gets++;
            if (REDIRECT_TO) return res.redirect(307, REDIRECT_TO);
            if (stats.failed < FAIL_FIRST) {
                stats.failed++;
                return res.status(503).set('Retry-After', '0').json({ error: 'try again' });
            }
            if (req.method === 'POST') { openPosts.add(res); res.on('close', () => openPosts.delete(res)); }
            next();
        }];
        if (AUTH) mcp.push(requireBearerAuth({ verifier: provider, expectedResource: mcpUrl,
                                               resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpUrl) }));
        mcp.push(SDK === '1' ? await sdk1Endpoint() : await sdk2Endpoint());
        app.all('/mcp', ...mcp);
        app.use((err, req, res, _next) => {
            log('error:', err?.stack ?? err);
            if (!res.headersSent) res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null });
            else res.end();
        });

        server.on('request', app);
        log(`sdk=${SDK}${SDK === '2' ? ` legacy=${LEGACY}` : ''} auth=${AUTH} token-ttl=${TOKEN_TTL}${REDIRECT_TO ? ` redirect-to=${REDIRECT_TO}` : ''}`);
        process.stdout.write(`listening ${mcpUrl.href}\n`);
    } catch (e) {
        log('start failed:', e?.stack ?? e);
        process.exit(1);
    }
});
server.on('error', (e) => { log('listen failed:', e.message); process.exit(1); });

let stopping = false;
async function stop(why) {
    if (stopping) return;
    stopping = true;
    log(`stopping (${why})`);
    setTimeout(() => process.exit(0), 2000).unref();
    await Promise.all(closers.map((c) => Promise.resolve(c()).catch(() => {})));
    server.close();
    server.closeAllConnections();
    process.exit(0);
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
if (!flags.has('ignore-eof')) {
    process.stdin.on('end', () => stop('stdin closed'));
    process.stdin.on('error', () => stop('stdin error'));
    process.stdin.resume();
}
