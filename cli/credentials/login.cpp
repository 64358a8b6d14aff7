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

#include <asio/ip/tcp.hpp>
#include <asio/read_until.hpp>
#include <asio/steady_timer.hpp>
#include <asio/streambuf.hpp>
#include <asio/write.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
    login_flow(asio::io_context& io, const json& remote, std::chrono::milliseconds wait)
        : io_(io), remote_(remote),
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
        remote::discover_authorization(
            http_, str(remote_, "url"), {},
            [this](std::optional<remote::server_auth> as, std::string why) {
                if (!as) return fail(why);
                as_ = std::move(*as);
                if (auto scope = str(remote_, "oauthScope"); !scope.empty()) as_.scope = scope;
                grant_.token_endpoint = as_.token_endpoint;
                grant_.resource = as_.resource;
                grant_.issuer = as_.issuer;
                grant_.scope = as_.scope;
                if (auto id = str(remote_, "oauthClientId"); !id.empty()) {
                    grant_.client_id = id;
                    return authorize();
                }
                if (as_.registration_endpoint.empty())
                    return fail(fmt::format(
                        "the authorization server {} offers no dynamic client registration: "
                        "register meith there as a public client with the redirect URI "
                        "http://127.0.0.1/callback (any port) and set `oauth = {{ client_id = "
                        "\"…\" }}` on the source",
                        as_.issuer));
                remote::register_client(
                    http_, as_, redirect_uri_,
                    [this](std::optional<remote::credentials> c, std::string why) {
                        if (!c) return fail(why);
                        grant_.client_id = c->client_id;
                        grant_.client_secret = c->client_secret;
                        authorize();
                    });
            });
    }

    const std::string& error() const { return error_; }
    const remote::credentials& grant() const { return grant_; }

  private:
    void authorize() {
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

    static void open_browser(const std::string& url) {
        const char* browser = std::getenv("BROWSER");
        if (browser != nullptr && *browser != '\0') {
            run_program({browser, url}, output::discard);
        } else if (std::getenv("DISPLAY") != nullptr || std::getenv("WAYLAND_DISPLAY") != nullptr) {
            run_program({"xdg-open", url}, output::discard);
        }
#ifdef __APPLE__
        else {
            run_program({"open", url}, output::discard);
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

    asio::io_context& io_;
    const json& remote_;
    remote::http_client http_;
    asio::ip::tcp::acceptor acceptor_;
    asio::steady_timer deadline_;
    std::chrono::milliseconds wait_;
    std::string redirect_uri_;
    remote::server_auth as_;
    remote::credentials grant_;
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
    login_flow flow(io, *remote, wait);
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
