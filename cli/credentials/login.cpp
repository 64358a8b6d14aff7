// login: `meith login SOURCE` — the OAuth 2.1 authorization code flow with PKCE for a remote
// MCP source (docs/protocol.md §18, MCP spec 2025-11-25 "Authorization"). meithd says where the
// server is (list_sources' `remote` member); this process discovers the authorization server,
// registers meith as a client when it must, listens on 127.0.0.1 for the redirect (RFC 8252
// §7.3), prints the authorization URL (and opens a browser where one runs), exchanges the code,
// writes the grant 0600 where meithd reads it, and restarts the source. Tokens are never
// printed.
#include "cli/commands/sources.hpp"
#include "cli/credentials/credentials.hpp"
#include "cli/errors.hpp"
#include "cli/help.hpp"
#include "cli/process.hpp"

#include "remote/oauth.hpp"
#include "secrets/grants.hpp"
#include "secrets/store.hpp"

#include <asio/ip/tcp.hpp>
#include <asio/read_until.hpp>
#include <asio/steady_timer.hpp>
#include <asio/streambuf.hpp>
#include <asio/write.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/core.h>

namespace meith::cli::credentials {

namespace {

namespace fs = std::filesystem;

std::string str(const json& o, const char* key) {
    const auto v = get_string(o, key);
    return v ? *v : std::string();
}

/// The flow's steps on one io_context; `error` set and the context stopped on any failure.
class login_flow {
  public:
    login_flow(asio::io_context& io, const json& remote, std::chrono::milliseconds wait,
               fs::path home, std::string source)
        : io_(io), remote_(remote), home_(std::move(home)), source_(std::move(source)),
          http_(io.get_executor(), remote::egress_policy{remote.value("allowPrivateNetwork", false),
                                                         str(remote, "caFile")}),
          acceptor_(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
          deadline_(io, wait), wait_(wait) {
        redirect_uri_ =
            fmt::format("http://127.0.0.1:{}/callback", acceptor_.local_endpoint().port());
    }

    void start() {
        deadline_.async_wait([this](const std::error_code& ec) {
            if (!ec)
                fail(fmt::format("no answer from the browser within {} s (run `meith login` "
                                 "again, or give it longer with --timeout-ms)",
                                 wait_.count() / 1000));
        });
        // The pre-registered client's secret or key, from the secret store.
        for (auto [key, into] : {std::pair{"oauthClientSecret", &grant_.client_secret},
                                 std::pair{"oauthPrivateKey", &grant_.private_key},
                                 std::pair{"oauthIdToken", &idp_.id_token}}) {
            const auto name = str(remote_, key);
            if (name.empty()) continue;
            std::vector<std::string> used;
            std::string why;
            auto value = secrets::expand("${secret:" + name + "}", home_, used, why);
            if (!value) return fail(why);
            *into = std::move(*value);
        }
        remote::bearer_challenge known;
        if (const json* ch = get_field(remote_, "challenge"); ch != nullptr && ch->is_object())
            known = {str(*ch, "resourceMetadata"), str(*ch, "scope"), str(*ch, "error")};
        remote::discover_authorization(
            http_, str(remote_, "url"), {}, known,
            [this, known](std::optional<remote::server_auth> as, std::string why) {
                if (!as) return fail(why);
                as_ = std::move(*as);
                if (auto scope = str(remote_, "oauthScope"); !scope.empty()) as_.scope = scope;
                if (!step_up(known)) return;
                grant_.token_endpoint = as_.token_endpoint;
                grant_.resource = as_.resource;
                grant_.issuer = as_.issuer;
                grant_.scope = as_.scope;
                if (auto id = str(remote_, "oauthClientId"); !id.empty()) grant_.client_id = id;
                const auto grant = choose_grant();
                if (grant.empty()) return;
                if (grant == "client_credentials") return client_credentials();
                if (grant == "cross_app_access") return cross_app_access();
                if (!as_.pkce_s256)
                    return fail("the authorization server does not list PKCE S256 in "
                                "code_challenge_methods_supported; meith will not log in without "
                                "it (MCP authorization spec)");
                if (as_.authorization_endpoint.empty())
                    return fail("the authorization server's metadata has no "
                                "authorization_endpoint");
                if (!grant_.client_id.empty()) return authorize();
                if (as_.registration_endpoint.empty())
                    return fail(fmt::format(
                        "the authorization server {} offers no dynamic client registration: "
                        "register meith there as a client with the redirect URI "
                        "http://127.0.0.1/callback (any port) and set `oauth = {{ client_id = "
                        "\"…\" }}` on the source (a confidential client's secret as "
                        "`client_secret = \"${{secret:NAME}}\"`, kept with `meith secret set "
                        "NAME`)",
                        as_.issuer));
                remote::register_client(
                    http_, as_, redirect_uri_,
                    [this](std::optional<remote::credentials> c, std::string why) {
                        if (!c) return fail(why);
                        grant_.client_id = c->client_id;
                        grant_.client_secret = c->client_secret;
                        grant_.auth_method = c->auth_method;
                        authorize();
                    });
            });
    }

    const std::string& error() const { return error_; }
    const remote::credentials& grant() const { return grant_; }

  private:
    /// A login after a 403 insufficient_scope asks for the scope the server named on top of
    /// the grant's own (MCP spec, "Scope challenge handling"). One that asks again for a scope
    /// the grant already held counts; past `max_step_ups` in a row it is refused, so a server
    /// that never accepts does not have the user log in forever. False (failed) then.
    bool step_up(const remote::bearer_challenge& known) {
        std::string why;
        std::optional<remote::credentials> old;
        if (auto stored = secrets::load_grant(home_, source_, why))
            old = remote::credentials_from_json(stored->text, why);
        if (!old || known.error != "insufficient_scope") return true;
        const bool again = covers(old->scope, known.scope);
        grant_.step_ups = again ? old->step_ups + 1 : 0;
        if (grant_.step_ups > max_step_ups) {
            fail(fmt::format("the server refused the scope \"{}\" (HTTP 403 insufficient_scope) "
                             "after {} logins that granted it; another login will not help: the "
                             "account you log in with may lack the permission (ask the server's "
                             "administrator)",
                             known.scope, grant_.step_ups));
            return false;
        }
        for (const auto& s : split_scope(old->scope))
            if (!covers(as_.scope, s)) as_.scope += (as_.scope.empty() ? "" : " ") + s;
        return true;
    }

    static std::vector<std::string> split_scope(const std::string& s) {
        std::vector<std::string> out;
        std::size_t i = 0;
        while (i < s.size()) {
            const auto sp = s.find(' ', i);
            const auto w = s.substr(i, sp == std::string::npos ? std::string::npos : sp - i);
            if (!w.empty()) out.push_back(w);
            if (sp == std::string::npos) break;
            i = sp + 1;
        }
        return out;
    }

    static bool covers(const std::string& held, const std::string& wanted) {
        const auto have = split_scope(held);
        for (const auto& w : split_scope(wanted))
            if (std::find(have.begin(), have.end(), w) == have.end()) return false;
        return true;
    }

    /// "authorization_code" or "client_credentials": the source's `oauth.grant`, else what the
    /// server offers (RFC 8414 `grant_types_supported`; absent: authorization_code), the
    /// client credentials grant only for a client with a secret or key. Empty (failed) when the
    /// server offers neither to this client, naming what it offers.
    std::string choose_grant() {
        const auto& offered = as_.grant_types;
        auto offers = [&](std::string_view g) {
            return offered.empty() || std::find(offered.begin(), offered.end(), g) != offered.end();
        };
        const bool confidential = !grant_.client_secret.empty() || !grant_.private_key.empty();
        idp_.token_endpoint = str(remote_, "oauthIdpTokenEndpoint");
        idp_.client_id = str(remote_, "oauthIdpClientId");
        const bool idp = !idp_.id_token.empty() && !idp_.token_endpoint.empty();
        // The grant type's name on the wire (RFC 8414 lists these).
        auto wire = [](const std::string& g) {
            return g == "cross_app_access" ? std::string(jwt_bearer) : g;
        };
        std::string chosen = str(remote_, "oauthGrant");
        if (chosen.empty()) {
            if (idp && offers(jwt_bearer))
                chosen = "cross_app_access";
            else if (offers("authorization_code"))
                chosen = "authorization_code";
            else if (offers("client_credentials") && confidential)
                chosen = "client_credentials";
        }
        // The source's own choice stands even where the server's metadata does not list it
        // (RFC 8414 §2: the list is what the server may say, not all it takes).
        const bool explicit_choice = !str(remote_, "oauthGrant").empty();
        if (!chosen.empty() && (explicit_choice || offers(wire(chosen))) &&
            (chosen != "client_credentials" || (confidential && !grant_.client_id.empty())) &&
            (chosen != "cross_app_access" || idp))
            return chosen;
        std::string list;
        for (const auto& g : offered)
            list += (list.empty() ? "" : ", ") + g;
        if (chosen == "client_credentials" || (chosen.empty() && offers("client_credentials")))
            fail(fmt::format("the authorization server offers the client credentials grant, "
                             "which needs the client registered with it: set `oauth = {{ "
                             "client_id = \"…\", client_secret = \"${{secret:NAME}}\" }}` (or "
                             "`private_key`) on the source, the value kept with `meith secret "
                             "set NAME`"));
        else if (offers(jwt_bearer))
            fail("the authorization server offers the JWT bearer grant of enterprise-managed "
                 "cross-app access (SEP-990): set `oauth = { client_id = \"…\", client_secret = "
                 "\"${secret:NAME}\", id_token = \"${secret:ID_TOKEN}\", idp_token_endpoint = "
                 "\"…\", idp_client_id = \"…\" }` on the source, with the ID token your "
                 "identity provider issued kept by `meith secret set ID_TOKEN`");
        else
            fail(fmt::format("the authorization server offers the grants {} and none that "
                             "meith uses{}: meith logs in with authorization_code (a browser), "
                             "client_credentials (a client secret or key) or the JWT bearer "
                             "grant of cross-app access (an ID token)",
                             list.empty() ? "(none listed)" : list,
                             chosen.empty() ? ""
                                            : fmt::format(" (the source asks for {})", chosen)));
        return {};
    }

    bool choose_auth_method() {
        std::string why;
        grant_.auth_method = remote::choose_auth_method(as_, grant_, why);
        if (grant_.auth_method.empty()) fail(why);
        return !grant_.auth_method.empty();
    }

    void cross_app_access() {
        if (!choose_auth_method()) return;
        fmt::print("Exchanging the ID token at {} for a grant to {} (cross-app access, no "
                   "browser)\n",
                   idp_.token_endpoint, as_.issuer);
        std::fflush(stdout);
        remote::cross_app_access_grant(
            http_, grant_, idp_, [this](std::optional<remote::credentials> c, std::string why) {
                if (!c) return fail(why);
                grant_ = std::move(*c);
                done();
            });
    }

    void client_credentials() {
        if (!choose_auth_method()) return;
        fmt::print("Asking {} for a token for the client {} (client credentials, no browser)\n",
                   as_.token_endpoint, grant_.client_id);
        std::fflush(stdout);
        remote::client_credentials_grant(
            http_, grant_, [this](std::optional<remote::credentials> c, std::string why) {
                if (!c) return fail(why);
                grant_ = std::move(*c);
                done();
            });
    }

    void authorize() {
        if (!choose_auth_method()) return;
        pkce_ = remote::make_pkce();
        state_ = remote::random_token();
        const auto url =
            remote::authorization_url(as_, grant_.client_id, redirect_uri_, pkce_, state_);
        fmt::print("Open this URL in a browser to authorize meith (waiting on {}):\n\n  {}\n\n",
                   redirect_uri_, url);
        std::fflush(stdout);
        open_browser(url);
        accept();
    }

    /// `$BROWSER URL`, else xdg-open on a desktop (open on macOS), started without waiting:
    /// a browser that stays until its window closes must not hold up the loopback listener
    /// its redirect comes back to.
    static void open_browser(const std::string& url) {
        const char* browser = std::getenv("BROWSER");
        if (browser != nullptr && *browser != '\0') {
            start_program({browser, url}, output::discard);
        } else if (std::getenv("DISPLAY") != nullptr || std::getenv("WAYLAND_DISPLAY") != nullptr) {
            start_program({"xdg-open", url}, output::discard);
        }
#ifdef __APPLE__
        else {
            start_program({"open", url}, output::discard);
        }
#endif
    }

    void accept() {
        auto sock = std::make_shared<asio::ip::tcp::socket>(io_);
        acceptor_.async_accept(*sock, [this, sock](const std::error_code& ec) {
            if (ec) return;
            auto buf = std::make_shared<asio::streambuf>(8192);
            asio::async_read_until(*sock, *buf, "\r\n\r\n",
                                   [this, sock, buf](const std::error_code& ec2, std::size_t n) {
                                       if (ec2) return accept();
                                       std::string head(asio::buffers_begin(buf->data()),
                                                        asio::buffers_begin(buf->data()) + n);
                                       on_request(sock, head);
                                   });
        });
    }

    void respond(const std::shared_ptr<asio::ip::tcp::socket>& sock, int status,
                 const std::string& message) {
        const std::string html = "<!doctype html><title>meith</title><p>" + message;
        auto body = std::make_shared<std::string>(fmt::format(
            "HTTP/1.1 {} {}\r\nContent-Type: text/html; charset=utf-8\r\nCache-Control: "
            "no-store\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
            status, status == 200 ? "OK" : "Bad Request", html.size()));
        *body += html;
        asio::async_write(*sock, asio::buffer(*body),
                          [sock, body](const std::error_code&, std::size_t) {});
    }

    void on_request(const std::shared_ptr<asio::ip::tcp::socket>& sock, const std::string& head) {
        const auto cb = remote::parse_callback_request(head);
        // Anything but the redirect with our state (another local process, a favicon) is
        // answered and the listener keeps waiting.
        if (!cb || cb->path != "/callback" || cb->state != state_) {
            respond(sock, 400, "Not the authorization answer meith is waiting for.");
            return accept();
        }
        if (!cb->error.empty()) {
            respond(sock, 400, "The authorization server refused: " + cb->error);
            return fail(fmt::format("the authorization server answered {}{}{}", cb->error,
                                    cb->error_description.empty() ? "" : ": ",
                                    cb->error_description));
        }
        if (cb->code.empty()) {
            respond(sock, 400, "No authorization code in the redirect.");
            return fail("the redirect carried no authorization code");
        }
        respond(sock, 200, "meith is authorized. You can close this tab.");
        remote::exchange_code(http_, grant_, cb->code, redirect_uri_, pkce_.verifier,
                              [this](std::optional<remote::credentials> c, std::string why) {
                                  if (!c) return fail(why);
                                  grant_ = std::move(*c);
                                  done();
                              });
    }

    void fail(std::string why) {
        if (error_.empty()) error_ = std::move(why);
        done();
    }

    void done() {
        deadline_.cancel();
        std::error_code ignored;
        acceptor_.close(ignored);
        io_.stop();
    }

    static constexpr int max_step_ups = 2; ///< logins in a row asking again for a held scope
    static constexpr const char* jwt_bearer = "urn:ietf:params:oauth:grant-type:jwt-bearer";

    asio::io_context& io_;
    const json& remote_;
    fs::path home_;
    std::string source_;
    remote::http_client http_;
    asio::ip::tcp::acceptor acceptor_;
    asio::steady_timer deadline_;
    std::chrono::milliseconds wait_;
    std::string redirect_uri_;
    remote::server_auth as_;
    remote::credentials grant_;
    remote::identity_provider idp_; ///< cross-app access: the user's identity provider
    remote::pkce_pair pkce_;
    std::string state_;
    std::string error_;
};

} // namespace

int login(const options& opts) {
    const std::string& name = opts.words.at(1);
    session s = open_session(opts);
    const json sources = list_sources(s);
    const json* src = nullptr;
    std::vector<std::string> names;
    for (const json& each : sources) {
        const auto n = get_string(each, "name");
        if (n == name) src = &each;
        if (n && get_field(each, "remote") != nullptr) names.push_back(*n);
    }
    if (src == nullptr)
        throw cli_error(exit_tool_failed, fmt::format("no source '{}'{}", sanitize(name, false),
                                                      did_you_mean(closest_names(name, names))));
    const json* remote = get_field(*src, "remote");
    if (remote == nullptr || !remote->is_object())
        throw cli_error(exit_tool_failed,
                        fmt::format("source '{}' is not a remote MCP server (it has no `url`): "
                                    "there is nothing to log in to",
                                    sanitize(name, false)));
    const fs::path home = str(*remote, "home");
    if (home.empty())
        throw cli_error(exit_error, "meithd did not say where its home is (an older meithd?): "
                                    "restart it with this version");

    asio::io_context io;
    const auto wait = std::chrono::milliseconds(opts.timeout_ms.value_or(300000));
    login_flow flow(io, *remote, wait, home, name);
    flow.start();
    io.run();
    if (!flow.error().empty())
        throw cli_error(exit_tool_failed, fmt::format("login to '{}' failed: {}",
                                                      sanitize(name, false), flow.error()));
    std::string why;
    const auto where = secrets::save_grant(home, name, remote::to_json(flow.grant()), why);
    if (!where)
        throw cli_error(exit_error, fmt::format("logged in to '{}', but the grant could not be "
                                                "kept: {}",
                                                sanitize(name, false), why));
    if (!why.empty()) fmt::print(stderr, "meith: {}\n", why);
    const auto& g = flow.grant();
    fmt::print("logged in to '{}'{}; the grant is kept in {}\n", sanitize(name, false),
               g.expires_at > 0
                   ? fmt::format(" (token valid for {} s, refreshed by meithd)",
                                 g.expires_at - static_cast<std::int64_t>(std::time(nullptr)))
                   : std::string(),
               where->starts_with("/") ? *where + " (0600)" : *where);
    std::fflush(stdout);

    // The source starts again with the grant (it may be failed for want of one).
    const std::string id = s.ids.next();
    s.conn.send_frame(protocol::encode_restart_source(id, name, opts.caller));
    (void)await_reply(s.conn, id, "source_restarted", settle_wait(opts), exit_tool_failed);
    const json settled = await_settled(s, {name}, settle_wait(opts));
    if (const int status = report_settled(settled, {name}, s.where, settle_wait(opts), true);
        status != exit_ok)
        return status;
    for (const json& each : settled)
        if (get_string(each, "name") == name)
            fmt::print("source '{}': ready, {} tools\n", sanitize(name, false),
                       each.value("tools", 0));
    return exit_ok;
}

} // namespace meith::cli::credentials
