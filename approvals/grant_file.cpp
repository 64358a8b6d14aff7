// The grants file: grants without a session kept across restarts in HOME/grants.json (mode
// 0600, written whole through a temporary file, at most once per I/O turn;
// approvals/approvals.hpp: persist_to).
#include "approvals/approvals.hpp"
#include "approvals/approvals_internal.hpp"

#include "config/private_file.hpp"
#include "permissions/secret.hpp"

#include <asio/post.hpp>

#include <simdjson.h>
#include <spdlog/spdlog.h>

namespace meith::approvals {

using detail::append_optional_uint;
using detail::epoch_ms;
using permissions::grant;
using permissions::grant_end;
using permissions::wall_clock;
using protocol::append_json_string;

// ---- persistence ------------------------------------------------------------------------------

std::optional<std::string> approval_service::persist_to(std::filesystem::path file) {
    persist_file_ = file;
    // Only a file of ours that nobody else could have written is trusted with grants.
    const config::private_file_read r = config::read_private_file(file);
    switch (r.st) {
    case config::private_file_read::status::ok:
        break;
    case config::private_file_read::status::missing:
        return std::nullopt; // none yet
    case config::private_file_read::status::unreadable:
        return file.string() + ": cannot be read (" + std::strerror(r.error) +
               "); no grants loaded";
    case config::private_file_read::status::untrusted:
        return file.string() +
               ": not a regular file of this user, or writable by group or others; no grants "
               "loaded (it is rewritten 0600 at the next grant)";
    }
    const std::string& text = r.text;
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    simdjson::dom::array list;
    if (parser.parse(text).get(root) != simdjson::SUCCESS ||
        root["grants"].get_array().get(list) != simdjson::SUCCESS)
        return file.string() + ": not a grants file (expected {\"grants\":[...]}); left as is";
    const auto now = wall_clock::now();
    std::vector<grant> expired;
    for (auto el : list) {
        grant g;
        std::string_view s;
        if (el["grantId"].get_string().get(s) != simdjson::SUCCESS) continue;
        g.id = std::string(s);
        if (el["caller"].get_string().get(s) == simdjson::SUCCESS)
            g.who = permissions::caller_from_claim(s);
        if (el["tool"].get_string().get(s) == simdjson::SUCCESS) g.tool = std::string(s);
        simdjson::dom::array caps;
        if (el["capabilities"].get_array().get(caps) == simdjson::SUCCESS)
            for (auto cap : caps)
                if (cap.get_string().get(s) == simdjson::SUCCESS)
                    if (auto c = permissions::capability_from_string(s))
                        g.capabilities |= static_cast<permissions::capability_set>(
                            1u << static_cast<unsigned>(*c));
        std::uint64_t n = 0;
        if (el["usesLeft"].get_uint64().get(n) == simdjson::SUCCESS) g.uses_left = n;
        std::int64_t ms = 0;
        if (el["expiresAtMs"].get_int64().get(ms) == simdjson::SUCCESS)
            g.expires_at = wall_clock::time_point(std::chrono::milliseconds(ms));
        if (el["createdAtMs"].get_int64().get(ms) == simdjson::SUCCESS)
            g.created_at = wall_clock::time_point(std::chrono::milliseconds(ms));
        if (el["approvalId"].get_string().get(s) == simdjson::SUCCESS)
            g.approval_id = std::string(s);
        if (g.capabilities == 0 || (g.uses_left && *g.uses_left == 0)) continue;
        if (g.expires_at && *g.expires_at <= now)
            expired.push_back(std::move(g));
        else
            grants_.add(std::move(g));
    }
    for (const auto& g : expired)
        audit_grant_end(g, grant_end::expired, {});
    if (!expired.empty()) save();
    schedule_expiry();
    return std::nullopt;
}

void approval_service::save() {
    if (!persist_file_ || save_pending_) return;
    save_pending_ = true;
    asio::post(ex_, [this, alive = std::weak_ptr<bool>(alive_)] {
        if (alive.expired() || !save_pending_) return;
        write_grants();
    });
}

void approval_service::write_grants() {
    save_pending_ = false;
    if (!persist_file_) return;
    std::string out = "{";
    protocol::json_members file(out);
    file.number("version", 1).key("grants").push_back('[');
    for (const auto& g : grants_.all()) {
        if (g.session_id) continue; // a session does not outlive the daemon
        if (out.back() != '[') out += ',';
        out += '{';
        protocol::json_members m(out);
        m.string("grantId", g.id);
        m.string_or_null("caller",
                         g.who ? std::optional(permissions::to_string(*g.who)) : std::nullopt);
        m.string_or_null("tool", g.tool ? std::optional<std::string_view>(*g.tool) : std::nullopt);
        permissions::append_capabilities(m.key("capabilities"), g.capabilities);
        append_optional_uint(m.key("usesLeft"), g.uses_left);
        if (g.expires_at)
            m.number("expiresAtMs", static_cast<std::uint64_t>(epoch_ms(*g.expires_at)));
        else
            m.null("expiresAtMs");
        m.number("createdAtMs", static_cast<std::uint64_t>(epoch_ms(g.created_at)));
        m.string_or_null("approvalId", g.approval_id.empty()
                                           ? std::nullopt
                                           : std::optional<std::string_view>(g.approval_id));
        out += '}';
    }
    out += "]}\n";
    // Written whole to a temporary file (0600) and renamed over: a crash leaves either file.
    if (!config::write_private_file(*persist_file_, out))
        spdlog::warn("cannot save grants to {}: {}", persist_file_->string(), std::strerror(errno));
}

} // namespace meith::approvals
