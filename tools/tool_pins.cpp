// tool_pins: pinned tool definitions and the quarantine of changed ones (see the header).
#include "tools/tool_pins.hpp"

#include "config/private_file.hpp"
#include "permissions/policy.hpp"
#include "tools/tool_source.hpp"

#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace meith::tools {

namespace {

std::string hex_sha256(std::string_view text) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    // Fetched once: OpenSSL 3 looks EVP_sha256() up in its provider at every digest, which
    // costs more than hashing a definition (meithd hashes each pinned tool at its start).
    static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (!sha256 || EVP_Digest(text.data(), text.size(), md, &n, sha256, nullptr) != 1) return {};
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * n);
    for (unsigned int i = 0; i < n; ++i) {
        out += digits[md[i] >> 4];
        out += digits[md[i] & 15];
    }
    return out;
}

std::string now_rfc3339() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

} // namespace

std::string tool_pins::key(std::string_view source, std::string_view remote_name) {
    std::string k(source);
    k += '/';
    k += remote_name;
    return k;
}

tool_pins::definition tool_pins::definition_of(const tool& t) {
    definition d;
    d.description = t.description;
    d.input_schema_json = t.input_schema_json;
    d.extra_json = t.extra_descriptor_json;
    permissions::append_capabilities(d.capabilities, t.capabilities);
    d.payload_kind = t.payload_kind;
    d.payload_format_json = t.payload_format_json;
    // Each member with its length, so no two definitions join to the same text.
    std::string text;
    for (const std::string_view part :
         {std::string_view(t.remote_name), std::string_view(d.description),
          std::string_view(d.input_schema_json), std::string_view(d.extra_json),
          std::string_view(d.capabilities)}) {
        text += std::to_string(part.size());
        text += ':';
        text += part;
    }
    d.hash = hex_sha256(text);
    return d;
}

std::optional<std::string> tool_pins::load(std::filesystem::path file) {
    file_ = file;
    const auto r = config::read_private_file(file);
    switch (r.st) {
    case config::private_file_read::status::missing:
        return std::nullopt;
    case config::private_file_read::status::unreadable:
        return file.string() + ": cannot be read (" + std::strerror(r.error) +
               "); every tool is pinned anew";
    case config::private_file_read::status::untrusted:
        return file.string() + ": not a regular file of this user, or writable by others; "
                               "every tool is pinned anew (the file is rewritten 0600)";
    case config::private_file_read::status::ok:
        break;
    }
    const auto j = nlohmann::json::parse(r.text, nullptr, false);
    if (!j.is_object() || !j.contains("pins") || !j["pins"].is_object())
        return file.string() + ": not a pins file; every tool is pinned anew";
    for (const auto& [k, v] : j["pins"].items()) {
        if (!v.is_object()) continue;
        definition d;
        d.hash = v.value("hash", "");
        d.description = v.value("description", "");
        d.input_schema_json = v.value("inputSchema", "");
        d.extra_json = v.value("extra", "");
        d.capabilities = v.value("capabilities", "");
        d.accepted_at = v.value("acceptedAt", "");
        d.payload_kind = v.value("payload", "");
        d.payload_format_json = v.value("payloadFormat", "");
        if (!d.hash.empty()) pins_.emplace(k, std::move(d));
    }
    return std::nullopt;
}

void tool_pins::save_if_changed() {
    if (dirty_) save();
}

bool tool_pins::save() {
    if (!file_) {
        dirty_ = false;
        return true;
    }
    nlohmann::json pins = nlohmann::json::object();
    for (const auto& [k, d] : pins_) {
        auto& pin = pins[k] = {{"hash", d.hash},
                               {"description", d.description},
                               {"inputSchema", d.input_schema_json},
                               {"extra", d.extra_json},
                               {"capabilities", d.capabilities},
                               {"acceptedAt", d.accepted_at}};
        if (!d.payload_kind.empty()) pin["payload"] = d.payload_kind;
        if (!d.payload_format_json.empty()) pin["payloadFormat"] = d.payload_format_json;
    }
    if (!config::write_private_file(*file_, nlohmann::json{{"pins", pins}}.dump(1) + "\n")) {
        // Kept dirty: the next listing (or accept) writes them again. Until then the pins live
        // only in memory and a restart of meithd would pin every tool anew.
        const int err = errno;
        dirty_ = true;
        spdlog::error("cannot write the pinned tool definitions to {}: {}; kept in memory, "
                      "written again at the next change",
                      file_->string(), std::strerror(err));
        return false;
    }
    dirty_ = false;
    return true;
}

tool_pins::verdict tool_pins::check(std::string_view source, const tool& t, bool quarantine_new,
                                    bool config_caps) {
    verdict v;
    definition d = definition_of(t);
    v.new_hash = d.hash;
    const std::string k = key(source, t.remote_name);
    auto it = pins_.find(k);
    if (it == pins_.end()) {
        v.new_tool = true;
        if (quarantine_new) {
            v.quarantined = true;
            pending_[k] = std::move(d);
            return v;
        }
        d.accepted_at = now_rfc3339();
        pins_.emplace(k, std::move(d));
        dirty_ = true; // written once per listing (save_if_changed), not once per tool
        return v;
    }
    v.old_hash = it->second.hash;
    if (it->second.hash == d.hash) {
        pending_.erase(k);
        if (it->second.payload_kind != d.payload_kind ||
            it->second.payload_format_json != d.payload_format_json) {
            // A pin of an older meith: what it lacks to be listed without its source.
            it->second.payload_kind = std::move(d.payload_kind);
            it->second.payload_format_json = std::move(d.payload_format_json);
            dirty_ = true;
        }
        return v;
    }
    const definition& pinned = it->second;
    if (config_caps && pinned.description == d.description &&
        pinned.input_schema_json == d.input_schema_json && pinned.extra_json == d.extra_json) {
        // The server changed nothing; the user's declaration did.
        v.capabilities_changed = true;
        v.old_capabilities = pinned.capabilities;
        v.new_capabilities = d.capabilities;
        d.accepted_at = now_rfc3339();
        it->second = std::move(d);
        pending_.erase(k);
        dirty_ = true;
        return v;
    }
    v.changed = true;
    v.quarantined = true;
    pending_[k] = std::move(d);
    return v;
}

std::vector<tool_definition> tool_pins::definitions_of(std::string_view source) const {
    std::vector<tool_definition> out;
    std::string prefix(source);
    prefix += '/';
    for (auto it = pins_.lower_bound(prefix); it != pins_.end() && it->first.starts_with(prefix);
         ++it) {
        const definition& d = it->second;
        tool_definition t;
        t.name = it->first.substr(prefix.size());
        t.description = d.description;
        t.input_schema_json = d.input_schema_json;
        t.extra_descriptor_json = d.extra_json;
        t.payload_kind = d.payload_kind;
        t.payload_format_json = d.payload_format_json;
        t.from_pin = true;
        const auto caps = nlohmann::json::parse(d.capabilities, nullptr, false);
        if (caps.is_array())
            for (const auto& c : caps)
                if (c.is_string()) t.capabilities.push_back(c.get<std::string>());
        if (!d.extra_json.empty()) {
            const auto extra = nlohmann::json::parse("{" + d.extra_json + "}", nullptr, false);
            if (extra.is_object() && extra.contains("execution") && extra["execution"].is_object())
                t.task_required = extra["execution"].value("taskSupport", "") == "required";
        }
        out.push_back(std::move(t));
    }
    return out;
}

bool tool_pins::accept(std::string_view source, std::string_view remote_name) {
    auto it = pending_.find(key(source, remote_name));
    if (it == pending_.end()) return false;
    definition d = std::move(it->second);
    pending_.erase(it);
    d.accepted_at = now_rfc3339();
    pins_[key(source, remote_name)] = std::move(d);
    save();
    return true;
}

std::optional<std::pair<std::optional<tool_pins::definition>, tool_pins::definition>>
tool_pins::held(std::string_view source, std::string_view remote_name) const {
    const std::string k = key(source, remote_name);
    auto it = pending_.find(k);
    if (it == pending_.end()) return std::nullopt;
    std::optional<definition> old;
    if (auto p = pins_.find(k); p != pins_.end()) old = p->second;
    return std::make_pair(old, it->second);
}

} // namespace meith::tools
