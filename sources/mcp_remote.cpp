// mcp_remote: what a remote MCP server (`kind = "mcp"` with `url`, docs/protocol.md §18) adds to
// mcp_source. Its child is meith-remote, the stdio <-> Streamable HTTP bridge, started in a
// network-only sandbox; everything else (handshake, listing, calls, families, supervision) is
// the stdio source's. The bridge asks meithd for its secrets over the pipe (`meith/credentials`)
// and hands back a refreshed grant (`meith/credentials_refreshed`), which meithd stores where
// secrets/grants.hpp says (the desktop Secret Service, else 0600 in HOME/credentials/NAME.json);
// every secret value goes to the redactor's exact values first.
#include "platform/self.hpp"
#include "sources/mcp_source.hpp"

#include "secrets/grants.hpp"
#include "secrets/store.hpp"

#include "audit/redactor.hpp"
#include "config/private_file.hpp"
#include "protocol/json_writer.hpp"
#include "remote/credentials.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

namespace meith::sources {

namespace fs = std::filesystem;

namespace {

/// meith-remote beside meithd, or in ../libexec/meith (the .deb), or $MEITH_REMOTE.
const fs::path& remote_program() {
    static const fs::path found = [] {
        if (const char* p = std::getenv("MEITH_REMOTE"); p != nullptr && *p != '\0')
            return fs::path(p);
        return platform::installed_program("meith-remote");
    }();
    return found;
}

} // namespace

config::source_config mcp_source::bridge_config(const config::source_config& cfg,
                                                const config::config& whole) {
    config::source_config b = cfg;
    const auto& program = remote_program();
    b.command = {program.empty() ? std::string("meith-remote") : program.string(),
                 "--source",
                 cfg.name,
                 "--url",
                 cfg.url,
                 "--max-message-bytes",
                 std::to_string(whole.limits.max_result_bytes + (1u << 20)),
                 "--connect-timeout-ms",
                 std::to_string(std::min<std::uint64_t>(cfg.start_timeout_ms, 30000))};
    if (cfg.allow_private_network) b.command.emplace_back("--allow-private-network");
    if (!cfg.ca_file.empty()) {
        b.command.emplace_back("--ca-file");
        b.command.push_back(cfg.ca_file.string());
    }
    b.env.clear(); // the bridge needs none; secrets come over its pipe
    return b;
}

permissions::capability_set mcp_source::bridge_capabilities() {
    return permissions::capability_set_from(std::vector<std::string>{"accesses-network"});
}

std::optional<std::string> mcp_source::before_start() {
    if (remote() && remote_program().empty())
        return std::string("meith-remote (the bridge to remote MCP servers) is not beside meithd "
                           "or in ../libexec/meith: reinstall meith");
    return std::nullopt;
}

void mcp_source::answer_credentials(const std::string& id_json) {
    std::string out = "{";
    protocol::json_members m(out);
    m.key("headers").push_back('[');
    bool first = true;
    std::vector<std::string> used; // the ${secret:…} values, which the bridge never echoes
    for (const auto& [name, value] : cfg_.headers) {
        std::string why;
        const auto before = used.size();
        auto resolved = secrets::expand(value, sandbox::confinement_home(), used, why);
        for (auto v = used.begin() + static_cast<std::ptrdiff_t>(before); v != used.end(); ++v)
            audit::add_exact_secret(*v);
        if (!resolved) {
            peer_.reply_error(id_json, -32603, "no credentials");
            return proc_.fail_permanently(fmt::format("header '{}': {}", name, why));
        }
        if (!first) out += ',';
        first = false;
        append_json_string(out, name + ": " + *resolved);
    }
    out += ']';
    protocol::append_json_string_array(m.key("secrets"), used);
    std::string why;
    std::optional<remote::credentials> grant;
    std::optional<secrets::stored_grant> stored;
    if (!sandbox::confinement_home().empty())
        stored = secrets::load_grant(sandbox::confinement_home(), cfg_.name, why);
    if (stored) {
        grant = remote::credentials_from_json(stored->text, why);
        if (!grant) why = fmt::format("the grant in {} is not one: {}", stored->where, why);
    }
    grant_held_ = grant.has_value();
    challenge_ = {}; // a fresh bridge: what it meets now is the challenge that counts
    grant_expires_at_ = grant ? grant->expires_at : 0;
    if (stored) grant_where_ = stored->where;
    if (grant) {
        for (const auto& v : remote::secret_values(*grant))
            audit::add_exact_secret(v);
        m.raw("grant", remote::to_json(*grant));
    } else {
        if (!why.empty())
            spdlog::warn("{}: no usable OAuth grant: {}; run `meith login {}`", label_, why,
                         cfg_.name);
        m.null("grant");
    }
    out += '}';
    peer_.reply(id_json, out);
}

void mcp_source::on_bridge_notification(std::string_view method, simdjson::dom::object params) {
    if (method == "meith/credentials_refreshed") {
        simdjson::dom::element grant;
        if (params["grant"].get(grant) != simdjson::SUCCESS) return;
        std::string why;
        auto c = remote::credentials_from_json(simdjson::minify(grant), why);
        if (!c) return;
        for (const auto& v : remote::secret_values(*c))
            audit::add_exact_secret(v);
        grant_held_ = true;
        grant_expires_at_ = c->expires_at;
        if (sandbox::confinement_home().empty()) return;
        // Synchronous: the Secret Service answers on the session bus within its own timeout,
        // once per refresh (minutes apart).
        auto where =
            secrets::save_grant(sandbox::confinement_home(), cfg_.name, remote::to_json(*c), why);
        if (!where)
            spdlog::warn("{}: cannot save the refreshed grant: {}", label_, why);
        else {
            grant_where_ = *where;
            if (!why.empty()) spdlog::warn("{}: {}", label_, why);
            spdlog::info("{}: refreshed its OAuth grant (valid for {} s), kept in {}", label_,
                         c->expires_at > 0 ? c->expires_at - std::time(nullptr) : 0, *where);
        }
    } else if (method == "meith/egress_refused") {
        std::string_view reason;
        if (params["reason"].get_string().get(reason) == simdjson::SUCCESS)
            proc_.fail_permanently(std::string(protocol::cut_utf8(reason, 600)));
    } else if (method == "meith/login_required" || method == "meith/step_up_required") {
        simdjson::dom::object ch;
        if (params["challenge"].get_object().get(ch) == simdjson::SUCCESS) {
            auto member = [&](std::string_view key) {
                std::string_view v;
                return ch[key].get_string().get(v) == simdjson::SUCCESS
                           ? std::string(protocol::cut_utf8(v, 1024))
                           : std::string();
            };
            challenge_ = {member("resourceMetadata"), member("scope"), member("error")};
        }
        // A step-up fails the call that met it (the bridge answered it), not the source: its
        // other tools still work with the grant it holds.
        if (method == "meith/step_up_required") return;
        std::string_view reason;
        if (params["reason"].get_string().get(reason) != simdjson::SUCCESS)
            reason = "the server asks for a login";
        proc_.fail_permanently(
            fmt::format("{}; run `meith login {}`", protocol::cut_utf8(reason, 400), cfg_.name));
    }
}

void mcp_source::append_remote_status(std::string& out) const {
    protocol::json_members m(out);
    m.key("remote").push_back('{');
    m.string("url", cfg_.url).boolean("allowPrivateNetwork", cfg_.allow_private_network);
    if (!cfg_.ca_file.empty()) m.string("caFile", cfg_.ca_file.string());
    if (!cfg_.oauth_client_id.empty()) m.string("oauthClientId", cfg_.oauth_client_id);
    // The client's secret and key by the name of the secret that holds them, never a value:
    // `meith login` reads the secret store itself.
    for (const auto& [key, value] :
         {std::pair{"oauthScope", &cfg_.oauth_scope},
          std::pair{"oauthClientSecret", &cfg_.oauth_client_secret},
          std::pair{"oauthPrivateKey", &cfg_.oauth_private_key},
          std::pair{"oauthGrant", &cfg_.oauth_grant},
          std::pair{"oauthIdToken", &cfg_.oauth_id_token},
          std::pair{"oauthIdpTokenEndpoint", &cfg_.oauth_idp_token_endpoint},
          std::pair{"oauthIdpClientId", &cfg_.oauth_idp_client_id}}) {
        if (value->empty()) continue;
        m.string(key, *value);
    }
    if (!challenge_.empty()) remote::append_json(m.key("challenge"), challenge_);
    // Where the grant is (or would be) kept, meithd's home for `meith login`, and the expiry of
    // the grant last read or refreshed (never a token): when `meith sources` says "logged in".
    m.string("credentials", grant_held_ && !grant_where_.empty()
                                ? grant_where_
                                : secrets::grant_store(sandbox::confinement_home(), cfg_.name));
    m.string("home", sandbox::confinement_home().string());
    m.boolean("loggedIn", grant_held_);
    if (grant_held_ && grant_expires_at_ > 0)
        m.number("expiresAt", static_cast<std::uint64_t>(grant_expires_at_));
    out += '}';
}

} // namespace meith::sources
