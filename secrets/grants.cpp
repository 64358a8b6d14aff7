// grants: a remote source's OAuth grant in the Secret Service or a 0600 file (see the header).
#include "secrets/grants.hpp"

#include "config/private_file.hpp"
#include "secrets/secret_service.hpp"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::secrets {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view in_service = "the desktop Secret Service";

} // namespace

fs::path grant_file(const fs::path& home, std::string_view source) {
    return home / "credentials" / (std::string(source) + ".json");
}

std::string grant_item_name(std::string_view source) {
    return "oauth-grant:" + std::string(source);
}

std::string grant_store(const fs::path& home, std::string_view source) {
    return secret_service::available() ? std::string(in_service)
                                       : grant_file(home, source).string();
}

std::optional<stored_grant> load_grant(const fs::path& home, std::string_view source,
                                       std::string& why) {
    why.clear();
    if (secret_service::available()) {
        auto text = secret_service::get(home, grant_item_name(source), why);
        if (text) return stored_grant{std::move(*text), std::string(in_service)};
        if (!why.empty()) return std::nullopt; // locked, or the service failed: said
    }
    const fs::path file = grant_file(home, source);
    auto r = config::read_private_file(file, std::size_t{1} << 20);
    switch (r.st) {
    case config::private_file_read::status::ok:
        return stored_grant{std::move(r.text), file.string()};
    case config::private_file_read::status::missing:
        return std::nullopt;
    case config::private_file_read::status::untrusted:
        why = fmt::format("{} is not a 0600 file of this user (or is over 1 MiB)", file.string());
        return std::nullopt;
    case config::private_file_read::status::unreadable:
        break;
    }
    why = fmt::format("cannot read {}: {}", file.string(), std::strerror(r.error));
    return std::nullopt;
}

std::optional<std::string> save_grant(const fs::path& home, std::string_view source,
                                      std::string_view text, std::string& why) {
    why.clear();
    const fs::path file = grant_file(home, source);
    if (secret_service::available()) {
        if (!secret_service::set(home, grant_item_name(source), text, why)) return std::nullopt;
        // Moved: no copy of the grant stays behind in the home.
        if (::unlink(file.c_str()) != 0 && errno != ENOENT)
            why = fmt::format("the grant is in {} but the old {} could not be removed: {}",
                              in_service, file.string(), std::strerror(errno));
        return std::string(in_service);
    }
    ::mkdir(file.parent_path().c_str(), 0700);
    std::string line(text);
    if (line.empty() || line.back() != '\n') line += '\n';
    if (!config::write_private_file(file, line)) {
        why = fmt::format("cannot write {}: {}", file.string(), std::strerror(errno));
        return std::nullopt;
    }
    return file.string();
}

} // namespace meith::secrets
