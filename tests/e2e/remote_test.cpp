// End-to-end tests of remote MCP sources (docs/protocol.md §18): the real meithd running
// meith-remote against the official SDKs' Streamable HTTP servers (1.x and 2.x) on 127.0.0.1
// (tests/mcp/http_server.mjs), `meith login` against an OAuth authorization server built on the
// SDK's auth helpers with short-lived tokens (the browser step scripted with fetch), and the
// egress check in a network namespace of the test's own, where 203.0.113.5 stands for a public
// address (a redirect from it to 127.0.0.1, and a name resolving to 127.0.0.1, are refused).
#include "daemon_fixture.hpp"
#include "test_skip.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>

using namespace meith::test;

namespace e2e_remote_test { // one namespace per file: the tests build as unity batches

namespace {

std::string mcp_dir() {
    return std::string(MEITH_SOURCE_DIR) + "/tests/mcp";
}

/// tests/mcp/http_server.mjs with `flags`; its URL once it listens.
struct http_server {
    explicit http_server(std::vector<std::string> flags)
        : proc([&] {
              std::vector<std::string> argv{"node", mcp_dir() + "/http_server.mjs"};
              argv.insert(argv.end(), flags.begin(), flags.end());
              return argv;
          }()) {
        INFO("tests/mcp/http_server.mjs: " << proc.err());
        REQUIRE(proc.wait_for("\n", 30s));
        const auto text = proc.out();
        const auto at = text.find("listening ");
        REQUIRE(at != std::string::npos);
        url = text.substr(at + 10, text.find('\n', at) - at - 10);
        origin = url.substr(0, url.rfind('/'));
    }
    background_process proc;
    std::string url, origin;
};

/// `flags` plus the test CA's server certificate (tests/mcp/tls: 127.0.0.1, localhost and
/// 203.0.113.5), so http_server serves HTTPS.
std::vector<std::string> with_test_cert(std::vector<std::string> flags) {
    flags.push_back("--tls-cert=" + mcp_dir() + "/tls/server.pem");
    flags.push_back("--tls-key=" + mcp_dir() + "/tls/server.key");
    return flags;
}

/// tests/mcp/fetch.mjs: METHOD URL (redirects followed) -> {status, url, body}.
json fetch(const std::string& method, const std::string& url) {
    // The test CA (tests/mcp/tls) for the https servers of the egress test.
    return run_json_command("NODE_EXTRA_CA_CERTS='" + mcp_dir() + "/tls/ca.pem' node '" +
                            mcp_dir() + "/fetch.mjs' " + method + " '" + url + "'");
}

json admin_stats(const http_server& s) {
    return json::parse(fetch("GET", s.origin + "/admin/stats")["body"].get<std::string>());
}

std::string remote_source(const std::string& name, const std::string& url,
                          const std::string& extra = "allow_private_network = true\n") {
    return "[[sources]]\nname = \"" + name + "\"\nkind = \"mcp\"\nurl = \"" + url +
           "\"\nprefix = \"" + name + "_\"\n" + extra +
           "capabilities = { echo = [\"read-only\"], add = [\"read-only\"], grow = "
           "[\"read-only\"], grown = [\"read-only\"], hang = [\"read-only\"], whoami = "
           "[\"read-only\"], slow = [\"read-only\"] }\n\n";
}

/// A tool_call and its tool_result frame (30 s at most); progress events go to `events`.
json call_tool(client& c, const std::string& tool, const json& args,
               std::vector<json>* events = nullptr) {
    return c.call(tool, args, json::object(), events, 30s);
}

/// The first text content of a call's MCP result.
std::string text_of(const json& frame) {
    const json& content = frame["result"]["content"];
    if (!content.is_object() || !content["content"].is_array() || content["content"].empty())
        return "(no text: " + frame.dump().substr(0, 400) + ")";
    return content["content"][0].value("text", "");
}

/// Waits until source `name` is in `state`; its status then.
json wait_state(client& c, const std::string& name, const std::string& state,
                std::chrono::milliseconds timeout = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    json s;
    while (std::chrono::steady_clock::now() < deadline) {
        s = source_status(c, name);
        if (s.is_object() && s["state"] == state) return s;
        std::this_thread::sleep_for(50ms);
    }
    INFO("source " << name << ": " << s.dump());
    FAIL("source '" << name << "' never became " << state);
    return s;
}

/// `meith login NAME` against `d`, the browser's step scripted: fetches the printed URL and
/// waits for the command to finish; returns what it printed (stdout + stderr).
std::string log_in(const daemon_process& d, const std::string& name) {
    background_process login({MEITH_CLI, "login", name}, {{"MEITH_HOME", d.home().string()}});
    INFO("meith login: " << login.out() << login.err());
    REQUIRE(login.wait_for("/authorize?", 30s));
    const auto printed = login.out();
    const auto at = printed.find("\n\n  ") + 4; // the URL's own indented line
    const auto auth_url = printed.substr(at, printed.find('\n', at) - at);
    CHECK(auth_url.find("code_challenge_method=S256") != std::string::npos);
    CHECK(auth_url.find("resource=") != std::string::npos);
    // Another local process answers the loopback listener first, without the state: refused,
    // and the listener keeps waiting for the real redirect.
    const auto at_redirect = auth_url.find("redirect_uri=http%3A%2F%2F127.0.0.1%3A");
    REQUIRE(at_redirect != std::string::npos);
    const auto port_from =
        at_redirect + std::string("redirect_uri=http%3A%2F%2F127.0.0.1%3A").size();
    const std::string port =
        auth_url.substr(port_from, auth_url.find("%2F", port_from) - port_from);
    const json intruder =
        fetch("GET", "http://127.0.0.1:" + port + "/callback?code=stolen&state=guessed");
    CHECK(intruder["status"] == 400);
    CHECK(intruder["body"].get<std::string>().find("Not the authorization answer") !=
          std::string::npos);
    const json browser = fetch("GET", auth_url);
    CHECK(browser["status"] == 200);
    CHECK(browser["body"].get<std::string>().find("meith is authorized") != std::string::npos);
    INFO("meith login: " << login.out() << login.err());
    REQUIRE(login.wait(30s) == 0);
    CHECK(login.out().find("source '" + name + "': ready, 6 tools") != std::string::npos);
    return login.out() + login.err();
}

/// `meith secret set NAME` with `value` piped in, for `home` (meith's own store: the tests
/// that call this set MEITH_SECRET_SERVICE=off and a MEITH_SECRETS_KEY of their own).
cli_result keep_secret(const fs::path& home, const std::string& name, const std::string& value) {
    return run_program({"/bin/sh"}, {"-c", "printf %s \"$VALUE\" | \"$MEITH\" secret set " + name},
                       {{"MEITH", MEITH_CLI}, {"MEITH_HOME", home.string()}, {"VALUE", value}});
}

bool has_node_modules() {
    return fs::exists(mcp_dir() + "/node_modules/@modelcontextprotocol/sdk");
}

} // namespace

TEST_CASE("remote: the SDK's Streamable HTTP servers (1.x and 2.x) as sources, both revisions",
          "[e2e][remote]") {
    if (!has_node_modules()) SKIP_TEST("tests/mcp/node_modules missing: run scripts/install-deps");
    http_server v1({"--sdk=1"});
    http_server v2({"--sdk=2"});
    daemon_process d(remote_source("one", v1.url) + remote_source("two", v2.url));
    client c(d.socket());
    const json s1 = wait_state(c, "one", "ready");
    const json s2 = wait_state(c, "two", "ready");
    CHECK(s1["protocolVersion"] == "2025-11-25"); // 1.x: initialize, a session
    CHECK(s2["protocolVersion"] == "2026-07-28"); // 2.x: server/discover, per request
    CHECK(s1["remote"]["url"] == v1.url);
    CHECK(s1["remote"]["loggedIn"] == false);
    CHECK(s1["tools"] == 6);
    CHECK(s1["sandbox"].dump().find("network") != std::string::npos);

    CHECK(text_of(call_tool(c, "one_echo", {{"text", "über 1"}})) == "über 1");
    CHECK(text_of(call_tool(c, "two_echo", {{"text", "über 2"}})) == "über 2");
    CHECK(text_of(call_tool(c, "two_add", {{"a", 2}, {"b", 40}})) == "42");

    // Progress on the POST's SSE stream reaches the caller as tool events.
    std::vector<json> events;
    CHECK(text_of(call_tool(c, "one_slow", {{"ms", 200}}, &events)) == "done");
    CHECK(!events.empty());
    for (const auto& e : events)
        CHECK(e.value("type", "") == "progress");

    // resources/read through meithd to the remote server.
    c.send({{"type", "mcp_request"},
            {"requestId", "r"},
            {"method", "resources/read"},
            {"params", {{"uri", "test://static"}}}});
    json r;
    do
        r = c.read(30s);
    while (r.value("requestId", "") != "r");
    INFO(r.dump());
    REQUIRE(r.contains("result"));
    CHECK(r["result"]["contents"][0]["text"] == "static resource");

    // `meith sources NAME` shows the revision and the sandbox as for a local server.
    const auto shown = run_cli({"sources", "one"}, d.home());
    CHECK(shown.status == 0);
    CHECK(shown.out.find("protocol:    MCP 2025-11-25") != std::string::npos);
    CHECK(shown.out.find("url:         " + v1.url) != std::string::npos);
}

TEST_CASE("remote: meith login, calls, a refresh, a 401 mid-session, a revoked grant's message, "
          "and no token in any log or audit line",
          "[e2e][remote][oauth]") {
    if (!has_node_modules()) SKIP_TEST("tests/mcp/node_modules missing: run scripts/install-deps");
    // The grant goes to the home's file, whatever desktop keyring runs (the next case: there).
    env_override no_keyring("MEITH_SECRET_SERVICE", "off");
    http_server as({"--sdk=1", "--auth", "--token-ttl=8"});
    daemon_process d(remote_source("auth", as.url));
    client c(d.socket());

    // No grant yet: the source fails and says which command mends it.
    const json before = wait_state(c, "auth", "failed");
    CHECK(before["lastError"].get<std::string>().find("run `meith login auth`") !=
          std::string::npos);

    // meith login: the URL on stdout, the browser step scripted, the grant stored 0600.
    const std::string login_output = log_in(d, "auth");
    const fs::path grant_file = d.home() / "credentials" / "auth.json";
    struct stat st {};
    REQUIRE(::stat(grant_file.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);

    client c2(d.socket());
    wait_state(c2, "auth", "ready");
    CHECK(text_of(call_tool(c2, "auth_whoami", json::object())) == "authorized");

    // A 401 mid-session (the server expires every token while ours is fresh): refreshed and
    // retried, unseen by the caller.
    const int unauthorized = admin_stats(as)["unauthorized"].get<int>();
    fetch("POST", as.origin + "/admin/expire");
    CHECK(text_of(call_tool(c2, "auth_echo", {{"text", "after a 401"}})) == "after a 401");
    CHECK(admin_stats(as)["unauthorized"].get<int>() > unauthorized);

    const int refreshes = admin_stats(as)["refreshes"].get<int>();
    CHECK(refreshes >= 1);

    // The 8 s token is refreshed before it expires (meith-remote's timer, 2 s early), calls go
    // on.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (admin_stats(as)["refreshes"] == refreshes && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(200ms);
    CHECK(admin_stats(as)["refreshes"].get<int>() > refreshes);
    CHECK(text_of(call_tool(c2, "auth_echo", {{"text", "after refresh"}})) == "after refresh");

    // Revoked: the call fails naming the command, and so does the source.
    fetch("POST", as.origin + "/admin/revoke");
    fetch("POST", as.origin + "/admin/expire");
    const json refused = call_tool(c2, "auth_echo", {{"text", "after revoke"}});
    CHECK(refused["result"]["ok"] == false);
    CHECK(refused.dump().find("run `meith login auth`") != std::string::npos);
    const json failed = wait_state(c2, "auth", "failed");
    CHECK(failed["lastError"].get<std::string>().find("revoked") != std::string::npos);
    CHECK(failed["lastError"].get<std::string>().find("run `meith login auth`") !=
          std::string::npos);

    // Every token the server saw, and the stored grant's: in no log, audit line or status.
    std::vector<std::string> secrets;
    const json stats = admin_stats(as);
    for (const auto& h : stats["authorizationHeaders"])
        secrets.push_back(h.get<std::string>().substr(7)); // "Bearer "
    const json stored = json::parse(slurp(grant_file));
    secrets.push_back(stored["access_token"]);
    secrets.push_back(stored["refresh_token"]);
    REQUIRE(secrets.size() >= 3);
    const std::string everything =
        d.log() + slurp(d.home() / "audit.jsonl") + source_status(c2, "auth").dump() + login_output;
    for (const auto& s : secrets) {
        INFO("token " << s.substr(0, 6) << "…");
        CHECK(everything.find(s) == std::string::npos);
    }
}

// Run by ctest under tests/cli/keyring_run.sh: a private session bus with GNOME Keyring's
// secrets component unlocked (MEITH_TEST_KEYRING=1).
TEST_CASE("remote: with a desktop Secret Service the OAuth grant is kept there, refreshed there, "
          "and never written to the home",
          "[e2e][remote][oauth][keyring]") {
    if (std::getenv("MEITH_TEST_KEYRING") == nullptr)
        SKIP_TEST("needs a session bus with a keyring: ctest runs it through "
                  "tests/cli/keyring_run.sh");
    if (!has_node_modules()) SKIP_TEST("tests/mcp/node_modules missing: run scripts/install-deps");
    http_server as({"--sdk=1", "--auth", "--token-ttl=8"});
    daemon_process d(remote_source("auth", as.url));
    client c(d.socket());
    wait_state(c, "auth", "failed");

    const std::string login_output = log_in(d, "auth");
    CHECK(login_output.find("the grant is kept in the desktop Secret Service") !=
          std::string::npos);
    const fs::path grant_file = d.home() / "credentials" / "auth.json";
    CHECK(!fs::exists(grant_file));
    const auto stored = [&] {
        auto r = run_program({"/usr/bin/secret-tool"},
                             {"lookup", "application", "meith", "meith-home", d.home().string(),
                              "name", "oauth-grant:auth"},
                             {});
        REQUIRE(r.status == 0);
        return json::parse(r.out);
    };
    const json first = stored();
    REQUIRE(first.contains("access_token"));
    REQUIRE(first.contains("refresh_token"));

    client c2(d.socket());
    wait_state(c2, "auth", "ready");
    CHECK(source_status(c2, "auth")["remote"]["credentials"] == "the desktop Secret Service");
    CHECK(source_status(c2, "auth")["remote"]["loggedIn"] == true);
    CHECK(text_of(call_tool(c2, "auth_echo", {{"text", "kept in the keyring"}})) ==
          "kept in the keyring");

    // The 8 s token is refreshed (2 s early); meithd keeps the new grant in the keyring.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    json now = first;
    while (now["access_token"] == first["access_token"] &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(200ms);
        now = stored();
    }
    CHECK(now["access_token"] != first["access_token"]);
    CHECK(!fs::exists(grant_file));
    CHECK(text_of(call_tool(c2, "auth_echo", {{"text", "after refresh"}})) == "after refresh");

    // `meith secret list` names secrets, not grants.
    auto names = run_program({MEITH_CLI}, {"secret", "list"}, {{"MEITH_HOME", d.home().string()}});
    CHECK(names.status == 0);
    CHECK(names.out.find("oauth-grant") == std::string::npos);
    // No token in a log or the audit.
    const std::string everything = d.log() + slurp(d.home() / "audit.jsonl") + login_output;
    for (const json* g : std::initializer_list<const json*>{&first, &now})
        for (const char* k : {"access_token", "refresh_token"}) {
            INFO(k);
            CHECK(everything.find((*g)[k].get<std::string>()) == std::string::npos);
        }
}

TEST_CASE("remote: a redirect to another origin (to a private address, and with "
          "allow_private_network too) and a name resolving to loopback are refused",
          "[e2e][remote][egress]") {
    if (!has_node_modules()) SKIP_TEST("tests/mcp/node_modules missing: run scripts/install-deps");
    if (const auto why = own_network_namespace(); !why.empty())
        SKIP_TEST("no network namespace of the test's own (" + why + "; needs root)");
    const std::string tls = mcp_dir() + "/tls/";
    http_server inside(with_test_cert({"--sdk=1"})); // https://127.0.0.1:P/mcp
    http_server outside(
        with_test_cert({"--sdk=1", "--host=203.0.113.5", "--redirect-to=" + inside.url}));
    const std::string ca = "ca_file = \"" + tls + "ca.pem\"\n";
    const std::string by_name = "https://localhost:" + inside.url.substr(inside.url.rfind(':') + 1);
    // A secret header: it, the bearer token and the call's body would follow the redirect.
    daemon_process d(
        remote_source("hop", outside.url, ca + "headers = { X-Api-Key = \"k-42\" }\n") +
        remote_source("byname", by_name, ca) +
        remote_source("allowed", outside.url, ca + "allow_private_network = true\n"));
    client c(d.socket());

    // Another origin: refused before anything goes there, with or without the flag.
    for (const std::string name : {"hop", "allowed"}) {
        const json s = wait_state(c, name, "failed");
        const auto error = s["lastError"].get<std::string>();
        INFO(name << ": " << error);
        CHECK(error.find("refused a redirect from https://203.0.113.5:") != std::string::npos);
        CHECK(error.find("to another origin, " + inside.origin) != std::string::npos);
        CHECK(error.find("set `url` to where it redirects") != std::string::npos);
    }

    const json named = wait_state(c, "byname", "failed");
    const auto named_error = named["lastError"].get<std::string>();
    INFO(named_error);
    CHECK(named_error.find("is a loopback address") != std::string::npos);

    // No request of any of them reached the server behind the redirect.
    CHECK(admin_stats(inside)["mcpRequests"].get<int>() == 0);
    CHECK(admin_stats(outside)["mcpRequests"].get<int>() >= 2); // hop and allowed, redirected
}

TEST_CASE("remote: a certificate no trusted CA signed and a redirect from https to http are "
          "refused, each saying what would allow it",
          "[e2e][remote][egress]") {
    if (!has_node_modules()) SKIP_TEST("tests/mcp/node_modules missing: run scripts/install-deps");
    if (const auto why = own_network_namespace(); !why.empty())
        SKIP_TEST("no network namespace of the test's own (" + why + "; needs root)");
    const std::string tls = mcp_dir() + "/tls/";
    // All on 203.0.113.5, an ordinary public address here: only TLS and the scheme decide.
    http_server plain({"--sdk=1", "--host=203.0.113.5"}); // http://203.0.113.5:P/mcp
    http_server secure(with_test_cert({"--sdk=1", "--host=203.0.113.5"}));
    http_server downgrade(
        with_test_cert({"--sdk=1", "--host=203.0.113.5", "--redirect-to=" + plain.url}));
    // The test CA's certificate names 127.0.0.1, localhost and 203.0.113.5, not 127.0.0.2.
    http_server misnamed(with_test_cert({"--sdk=1", "--host=127.0.0.2"}));
    // A certificate from a CA the source trusts, expired since 2000 (tests/mcp/tls/README.md).
    http_server expired(
        {"--sdk=1", "--tls-cert=" + tls + "expired.pem", "--tls-key=" + tls + "expired.key"});
    const std::string ca = "ca_file = \"" + tls + "ca.pem\"\n";
    // The test CA is in no system store: without ca_file the server's certificate is not
    // trusted, and allow_private_network does not change that.
    daemon_process d(
        remote_source("untrusted", secure.url, "") +
        remote_source("untrusted_private", secure.url, "allow_private_network = true\n") +
        remote_source("downgrade", downgrade.url, ca) + remote_source("trusted", secure.url, ca) +
        remote_source("misnamed", misnamed.url, ca + "allow_private_network = true\n") +
        remote_source("expired", expired.url,
                      "ca_file = \"" + tls + "expired-ca.pem\"\nallow_private_network = true\n"));
    client c(d.socket());

    for (const std::string name : {"untrusted", "untrusted_private"}) {
        const json s = wait_state(c, name, "failed");
        const auto error = s["lastError"].get<std::string>();
        INFO(name << ": " << error);
        CHECK(error.find("certificate") != std::string::npos);
        CHECK(error.find("ca_file") != std::string::npos);
    }
    const json down = wait_state(c, "downgrade", "failed");
    const auto down_error = down["lastError"].get<std::string>();
    INFO(down_error);
    CHECK(down_error.find("http://") != std::string::npos);
    CHECK(down_error.find("allow_private_network = true") != std::string::npos);

    // A certificate for another name, or an expired one, is an error, not a refusal (the
    // server may mend it): the source is restarted, as for any failed start, not failed at once.
    for (const auto& [name, says] : std::vector<std::pair<std::string, std::string>>{
             {"misnamed", "127.0.0.2"}, {"expired", "expired"}}) {
        json st;
        for (int i = 0; i < 300; ++i) {
            st = source_status(c, name);
            if (st["restarts"].get<int>() >= 1 &&
                st.value("lastError", "").find(says) != std::string::npos)
                break;
            std::this_thread::sleep_for(50ms);
        }
        INFO(st.dump());
        CHECK(st["restarts"].get<int>() >= 1);
        CHECK(st.value("lastError", "").find(says) != std::string::npos);
        CHECK(st.value("lastError", "").find("ca_file") == std::string::npos);
    }

    // The same server with the test CA works.
    wait_state(c, "trusted", "ready");
    CHECK(text_of(call_tool(c, "trusted_echo", {{"text", "verified"}})) == "verified");
    // No request of the refused sources reached a server: the handshake failed before one,
    // and the plain server behind the redirect was never asked.
    CHECK(admin_stats(plain)["mcpRequests"].get<int>() == 0);
    CHECK(admin_stats(downgrade)["mcpRequests"].get<int>() >= 1);
}

TEST_CASE("remote: retries, Last-Event-ID resumption, the GET stream, a dropped session, the "
          "session's DELETE, and a static header from a secret file",
          "[e2e][remote][transport]") {
    if (!has_node_modules()) SKIP_TEST("tests/mcp/node_modules missing: run scripts/install-deps");
    http_server s({"--sdk=1", "--fail-first=2"});
    const std::string secret = "s3cr3t-value-12345";
    daemon_process d(remote_source("st", s.url,
                                   "allow_private_network = true\n"
                                   "headers = { X-Api-Key = \"key-${secret:apikey}\" }\n"),
                     {}, [&](const fs::path& home) {
                         fs::create_directories(home / "secrets");
                         const auto file = home / "secrets" / "apikey";
                         std::ofstream(file) << secret << "\n";
                         fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
                     });
    client c(d.socket());
    wait_state(c, "st", "ready");
    json stats = admin_stats(s);
    CHECK(stats["failed"] == 2); // two 503s, retried with backoff: the source never noticed
    CHECK(stats["headers"]["x-api-key"] == "key-" + secret);
    CHECK(stats["headers"]["mcp-protocol-version"] == "2025-11-25");

    // An SSE answer cut mid-call is resumed from its last event id; the call completes.
    c.send({{"type", "tool_call"},
            {"requestId", "slow"},
            {"toolName", "st_slow"},
            {"arguments", {{"ms", 2000}}}});
    const json first = c.read(30s);
    CHECK(first["type"] == "tool_event");
    const json cut = fetch("POST", s.origin + "/admin/cut");
    CHECK(json::parse(cut["body"].get<std::string>())["cut"] == 1);
    std::vector<json> events;
    const json done = c.wait_result("slow", &events, 30s);
    CHECK(text_of(done) == "done");
    CHECK(events.size() == 4); // progress 1..4 after the first: none lost, none twice
    CHECK(admin_stats(s)["gets"].get<int>() >= 2); // the session's stream and the resumption

    // A cancelled call's answer stream is closed, even by a server that ignores the cancel.
    c.send({{"type", "tool_call"},
            {"requestId", "hung"},
            {"toolName", "st_hang"},
            {"arguments", json::object()}});
    const auto open_deadline = std::chrono::steady_clock::now() + 10s;
    while (admin_stats(s)["openPosts"] == 0 && std::chrono::steady_clock::now() < open_deadline)
        std::this_thread::sleep_for(50ms);
    REQUIRE(admin_stats(s)["openPosts"] == 1);
    c.send({{"type", "cancel_tool_call"}, {"requestId", "hung"}});
    CHECK(c.wait_result("hung")["result"]["error"]["code"] == "CANCELLED");
    const auto closed_deadline = std::chrono::steady_clock::now() + 10s;
    while (admin_stats(s)["openPosts"] != 0 && std::chrono::steady_clock::now() < closed_deadline)
        std::this_thread::sleep_for(50ms);
    CHECK(admin_stats(s)["openPosts"] == 0);

    // tools/list_changed comes on the session's GET stream: meithd lists again.
    CHECK(text_of(call_tool(c, "st_grow", json::object())) == "grew");
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (source_status(c, "st")["tools"] != 7 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(50ms);
    CHECK(source_status(c, "st")["tools"] == 7);
    CHECK(text_of(call_tool(c, "st_grown", json::object())) == "grown");

    // The server forgets the session: the bridge meets a 404, meithd starts it anew.
    fetch("POST", s.origin + "/admin/drop-sessions");
    const auto deadline2 = std::chrono::steady_clock::now() + 30s;
    while (source_status(c, "st")["restarts"] == 0 && std::chrono::steady_clock::now() < deadline2)
        std::this_thread::sleep_for(50ms);
    CHECK(source_status(c, "st")["restarts"].get<int>() >= 1);
    wait_state(c, "st", "ready");
    CHECK(text_of(call_tool(c, "st_echo", {{"text", "new session"}})) == "new session");

    // The secret never reached a log line or the status.
    CHECK(d.log().find(secret) == std::string::npos);
    CHECK(source_status(c, "st").dump().find(secret) == std::string::npos);

    // Stopping meithd ends the session with a DELETE.
    const int deletes = admin_stats(s)["deletes"].get<int>();
    CHECK(d.stop() == 0);
    CHECK(admin_stats(s)["deletes"].get<int>() > deletes);
}

// ---- issue 41: what the conformance suite found, as a user meets it ---------------------------

TEST_CASE("remote (41): protected-resource metadata naming another resource is refused before "
          "any authorization request, saying why",
          "[e2e][remote][oauth]") {
    if (!has_node_modules()) SKIP_TEST("tests/mcp/node_modules missing: run scripts/install-deps");
    // The server's metadata says its resource is another server: a token asked for that one
    // would be sent here, and the user would have logged in for the other resource.
    http_server s({"--auth", "--prm-resource=https://evil.example.com/mcp"});
    daemon_process d(remote_source("mis", s.url));
    client c(d.socket());
    wait_state(c, "mis", "failed");
    const auto login = run_cli({"login", "mis", "--timeout-ms", "20000"}, d.home());
    INFO(login.out << login.err);
    CHECK(login.status == 1);
    CHECK_THAT(login.err,
               Catch::Contains("the server's protected-resource metadata names the resource "
                               "https://evil.example.com/mcp, which is not " +
                               s.url +
                               " (RFC 9728 §3.3): meith asks for no token for another "
                               "resource"));
    const json stats = admin_stats(s);
    CHECK(stats["authorizeRequests"] == 0);
    CHECK(stats["tokenRequests"].empty());
    CHECK(stats["tokensIssued"] == 0);
    CHECK_FALSE(fs::exists(d.home() / "credentials" / "mis.json"));
}

TEST_CASE("remote (41): a pre-registered client's secret goes from the secret store to the "
          "token endpoint, and nowhere else",
          "[e2e][remote][oauth][secrets]") {
    if (!has_node_modules()) SKIP_TEST("tests/mcp/node_modules missing: run scripts/install-deps");
    temp_dir keys;
    env_override key("MEITH_SECRETS_KEY", (keys.path / "k" / "secrets.key").string());
    env_override own("MEITH_SECRET_SERVICE", "off");
    const std::string secret = "pre-registered-secret-7f3a9c1e5b";
    http_server s({"--auth", "--client=meith-pre:" + secret});

    // In the config the secret is only named; a value there is refused at load.
    const std::string source =
        remote_source("pre", s.url,
                      "allow_private_network = true\noauth = { client_id = \"meith-pre\", "
                      "client_secret = \"${secret:PRE_SECRET}\" }\n");
    daemon_process d(source);
    REQUIRE(keep_secret(d.home(), "PRE_SECRET", secret).status == 0);
    client c(d.socket());
    const json before = wait_state(c, "pre", "failed");
    CHECK(before["remote"]["oauthClientId"] == "meith-pre");
    CHECK(before["remote"]["oauthClientSecret"] == "PRE_SECRET"); // the name, never the value

    const std::string login_output = log_in(d, "pre");
    CHECK(text_of(call_tool(c, "pre_whoami", json::object())) == "authorized");
    // No dynamic registration; the token request carried the pre-registered id and secret
    // (client_secret_post: the only method this server lists besides none).
    const json stats = admin_stats(s);
    REQUIRE(stats["tokenRequests"].size() == 1);
    CHECK(stats["tokenRequests"][0]["client_id"] == "meith-pre");
    CHECK(stats["tokenRequests"][0]["secret"] == true);

    // The value is in no file meith wrote but the grant (0600), no log, audit line or status.
    const std::string everything = d.log() + slurp(d.home() / "audit.jsonl") + login_output +
                                   source_status(c, "pre").dump() +
                                   run_cli({"sources", "pre"}, d.home()).out;
    CHECK(everything.find(secret) == std::string::npos);
    CHECK(everything.find(secret.substr(0, 12)) == std::string::npos);

    // A secret written into the config itself is refused, saying where it belongs.
    temp_dir bad;
    std::ofstream(bad.path / "meithd.toml")
        << remote_source("plain", s.url,
                         "allow_private_network = true\noauth = { client_id = \"x\", "
                         "client_secret = \"" +
                             secret + "\" }\n");
    const auto refused = run_program(
        {MEITH_MEITHD},
        {"--home", (bad.path / "home").string(), "--config", (bad.path / "meithd.toml").string()},
        {});
    CHECK(refused.status == 1);
    CHECK_THAT(refused.err,
               Catch::Contains("oauth.client_secret of source 'plain' must name a secret, "
                               "as \"${secret:NAME}\""));
    CHECK_THAT(refused.err, Catch::Contains("meith secret set NAME"));
    CHECK(refused.err.find(secret) == std::string::npos);
}

TEST_CASE("remote (41): a client credentials grant needs no browser, and meith-remote asks for "
          "a new token itself when the old one expires",
          "[e2e][remote][oauth][secrets]") {
    if (!has_node_modules()) SKIP_TEST("tests/mcp/node_modules missing: run scripts/install-deps");
    temp_dir keys;
    env_override key("MEITH_SECRETS_KEY", (keys.path / "k" / "secrets.key").string());
    env_override own("MEITH_SECRET_SERVICE", "off");
    const std::string secret = "machine-client-secret-2b8e41d07c";
    http_server s({"--auth", "--token-ttl=3", "--client=meith-ci:" + secret});
    daemon_process d(remote_source("ci", s.url,
                                   "allow_private_network = true\noauth = { client_id = "
                                   "\"meith-ci\", client_secret = \"${secret:CI_SECRET}\", "
                                   "grant = \"client_credentials\" }\n"));
    REQUIRE(keep_secret(d.home(), "CI_SECRET", secret).status == 0);
    client c(d.socket());
    wait_state(c, "ci", "failed");
    // No browser, no URL to open: one token request as the client itself.
    const auto login = run_cli({"login", "ci", "--timeout-ms", "20000"}, d.home());
    INFO(login.out << login.err);
    REQUIRE(login.status == 0);
    CHECK_THAT(login.out, Catch::Contains("(client credentials, no browser)"));
    CHECK_THAT(login.out, !Catch::Contains("/authorize?"));
    CHECK_THAT(login.out, Catch::Contains("source 'ci': ready, 6 tools"));
    CHECK(text_of(call_tool(c, "ci_whoami", json::object())) == "authorized");
    CHECK(admin_stats(s)["authorizeRequests"] == 0);

    // The 3 s token runs out; with no refresh token, meith-remote asks for a new one as the
    // client, before it expires, and the source stays ready.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (admin_stats(s)["tokensIssued"].get<int>() < 3 &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(200ms);
    const json stats = admin_stats(s);
    CHECK(stats["tokensIssued"].get<int>() >= 3);
    CHECK(stats["unauthorized"] == 2); // the first start and the login's probe; none since
    CHECK(text_of(call_tool(c, "ci_whoami", json::object())) == "authorized");
    CHECK(source_status(c, "ci")["state"] == "ready");
    for (const auto& r : stats["tokenRequests"]) {
        CHECK(r["client_id"] == "meith-ci");
        CHECK(r["secret"] == true);
    }
    const std::string everything =
        d.log() + slurp(d.home() / "audit.jsonl") + login.out + login.err;
    CHECK(everything.find(secret) == std::string::npos);
}

} // namespace e2e_remote_test
