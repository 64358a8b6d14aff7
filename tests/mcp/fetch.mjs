// fetch.mjs: one HTTP request for the remote-source e2e tests (tests/e2e/remote_test.cpp) —
// the "browser" of `meith login` (following the authorization server's redirect to meith's
// loopback listener) and the test server's /admin endpoints.
//   node fetch.mjs METHOD URL
// Prints {"status":N,"url":FINAL_URL,"body":TEXT} and exits 0 when a response arrived.
const [method, url] = process.argv.slice(2);
try {
    const r = await fetch(url, { method, redirect: 'follow' });
    process.stdout.write(JSON.stringify({ status: r.status, url: r.url, body: await r.text() }) + '\n');
} catch (e) {
    process.stderr.write(`fetch.mjs: ${method} ${url}: ${e.cause?.message ?? e.message}\n`);
    process.exit(1);
}
