// config_edit: a rule added to a source's network.allow, as a text edit (see the header).
#include "config/config_edit.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace meith::config {

namespace {

/// The byte offset in `text` of toml++'s (line, column) position: both 1-based, columns
/// counted in code points. npos when the text has no such position.
std::size_t offset_of(std::string_view text, const toml::source_position& pos) {
    std::size_t at = 0;
    for (toml::source_index line = 1; line < pos.line; ++line) {
        at = text.find('\n', at);
        if (at == std::string_view::npos) return at;
        ++at;
    }
    for (toml::source_index col = 1; col < pos.column; ++col) {
        if (at >= text.size() || text[at] == '\n') return std::string_view::npos;
        ++at;
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80)
            ++at; // the rest of a multi-byte code point
    }
    return at;
}

/// `s` as a TOML basic string: "…", with '"', '\\' and control characters escaped.
std::string toml_basic_string(std::string_view s) {
    std::string out = "\"";
    for (const char ch : s) {
        if (ch == '"' || ch == '\\') {
            out += '\\';
            out += ch;
        } else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
            out += fmt::format("\\u{:04X}", static_cast<unsigned char>(ch));
        } else {
            out += ch;
        }
    }
    return out + '"';
}

const toml::table* source_table(const toml::table& root, std::string_view source) {
    const toml::array* sources = root["sources"].as_array();
    if (sources == nullptr) return nullptr;
    for (const auto& entry : *sources) {
        const toml::table* t = entry.as_table();
        if (t == nullptr) continue;
        if (auto name = (*t)["name"].value<std::string_view>(); name && *name == source) return t;
    }
    return nullptr;
}

/// `text` parsed into `root`, and its `[[sources]]` entry named `source`; null with `why`
/// when the text does not parse or has no such entry.
const toml::table* parse_source(std::string_view text, std::string_view source, toml::table& root,
                                std::string& why) {
    try {
        root = toml::parse(text);
    } catch (const toml::parse_error& e) {
        why = fmt::format("the config does not parse: {}", e.description());
        return nullptr;
    }
    const toml::table* src = source_table(root, source);
    if (src == nullptr) why = fmt::format("the config has no [[sources]] entry named '{}'", source);
    return src;
}

bool lists_rule(const toml::table& root, std::string_view source, std::string_view rule) {
    const toml::table* src = source_table(root, source);
    if (src == nullptr) return false;
    const toml::array* allow = (*src)["network"]["allow"].as_array();
    if (allow == nullptr) return false;
    for (const auto& r : *allow)
        if (auto s = r.value<std::string_view>(); s && *s == rule) return true;
    return false;
}

} // namespace

std::optional<std::string> with_network_allow_rule(std::string_view text, std::string_view source,
                                                   std::string_view rule, std::string& why) {
    toml::table root;
    const toml::table* src = parse_source(text, source, root, why);
    if (src == nullptr) return std::nullopt;
    if (lists_rule(root, source, rule)) return std::string(text);
    const toml::node* network = src->get("network");
    if (network == nullptr || !network->is_table()) {
        why = fmt::format("source '{}' has no network table", source);
        return std::nullopt;
    }
    const toml::table& net = *network->as_table();
    std::string out(text);
    const std::string quoted = toml_basic_string(rule);
    if (const toml::node* allow = net.get("allow")) {
        // Right after the array's '[': `"rule", ` is valid before any element and before
        // the ']' of an empty array (TOML 1.0 allows a trailing comma in arrays).
        const std::size_t open = offset_of(text, allow->source().begin);
        if (!allow->is_array() || open == std::string_view::npos || text[open] != '[') {
            why = "its network.allow is not an array this edit can find";
            return std::nullopt;
        }
        out.insert(open + 1, quoted + ", ");
    } else if (net.is_inline()) {
        // `network = { ... }`: a new first key (no trailing comma: inline tables forbid it).
        const std::size_t open = offset_of(text, net.source().begin);
        if (open == std::string_view::npos || text[open] != '{') {
            why = "its network table is not where this edit can find it";
            return std::nullopt;
        }
        out.insert(open + 1, " allow = [" + quoted + "]" + (net.empty() ? " " : ","));
    } else {
        // A `[sources.network]`-style header: a new line after it.
        const std::size_t header = offset_of(text, net.source().begin);
        const std::size_t eol = header == std::string_view::npos ? header : text.find('\n', header);
        if (eol == std::string_view::npos || text[header] != '[') {
            why = "its network table is not where this edit can find it";
            return std::nullopt;
        }
        out.insert(eol + 1, "allow = [" + quoted + "]\n");
    }
    // What was written must read back as meant: the rule in this source's allow-list.
    try {
        const toml::table again = toml::parse(out);
        if (lists_rule(again, source, rule)) return out;
    } catch (const toml::parse_error&) {
    }
    why = "the edited config would not read back with the rule in place (an unusual layout); "
          "add it by hand";
    return std::nullopt;
}

namespace {

/// `file`'s target with `edit` applied to its text: written to a temporary file beside it with
/// its mode, fsynced and renamed over it. An error in words, or nullopt when done (or no change).
std::optional<std::string>
edit_file(const std::filesystem::path& file,
          const std::function<std::optional<std::string>(const std::string&, std::string&)>& edit) {
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::canonical(file, ec);
    if (ec) return fmt::format("cannot resolve {}: {}", file.string(), ec.message());
    std::ifstream in(target, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in) return fmt::format("cannot read {}", target.string());
    const std::string text = ss.str();
    std::string why;
    const auto next = edit(text, why);
    if (!next) return fmt::format("{}: {}", target.string(), why);
    if (*next == text) return std::nullopt;

    struct stat st {};
    if (::stat(target.c_str(), &st) != 0)
        return fmt::format("cannot stat {}: {}", target.string(), std::strerror(errno));
    std::string tmp = target.string() + ".meith-XXXXXX";
    const int fd = ::mkstemp(tmp.data());
    if (fd < 0)
        return fmt::format("cannot write beside {}: {}", target.string(), std::strerror(errno));
    bool ok = ::fchmod(fd, st.st_mode & 07777) == 0;
    std::size_t done = 0;
    while (ok && done < next->size()) {
        const ssize_t n = ::write(fd, next->data() + done, next->size() - done);
        if (n < 0 && errno == EINTR) continue;
        ok = n > 0;
        if (ok) done += static_cast<std::size_t>(n);
    }
    ok = ok && ::fsync(fd) == 0;
    const int err = errno;
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), target.c_str()) != 0) {
        const int e = ok ? errno : err;
        ::unlink(tmp.c_str());
        return fmt::format("cannot replace {}: {}", target.string(), std::strerror(e));
    }
    return std::nullopt;
}

/// `text` with one key of `source`'s entry set to `value` (TOML text): the key and its value
/// replaced where it is, else a new line after the entry's last key.
std::optional<std::string> with_source_key(std::string_view text, std::string_view source,
                                           const std::string& key, const std::string& value,
                                           std::string& why) {
    toml::table root;
    const toml::table* src = parse_source(text, source, root, why);
    if (src == nullptr) return std::nullopt;
    std::string out(text);
    std::size_t last_end = 0;
    for (auto&& [k, v] : *src) {
        const bool header = (v.is_table() && !v.as_table()->is_inline()) || v.is_array_of_tables();
        if (k.str() == key) {
            const std::size_t from = offset_of(text, k.source().begin);
            const std::size_t to = offset_of(text, v.source().end);
            if (header || from == std::string_view::npos || to == std::string_view::npos ||
                to < from) {
                why = fmt::format("its `{}` is written as a table of its own; set it by hand", key);
                return std::nullopt;
            }
            out.replace(from, to - from, key + " = " + value);
            return out;
        }
        if (header) continue;
        const std::size_t end = offset_of(text, v.source().end);
        if (end != std::string_view::npos) last_end = std::max(last_end, end);
    }
    const std::size_t eol = last_end == 0 ? std::string::npos : out.find('\n', last_end);
    if (eol == std::string::npos) {
        why = "its entry is not where this edit can find it";
        return std::nullopt;
    }
    out.insert(eol + 1, key + " = " + value + "\n");
    return out;
}

} // namespace

std::optional<std::string> add_network_allow_rule(const std::filesystem::path& file,
                                                  std::string_view source, std::string_view rule) {
    return edit_file(file, [&](const std::string& text, std::string& why) {
        return with_network_allow_rule(text, source, rule, why);
    });
}

std::optional<std::string>
with_source_keys(std::string_view text, std::string_view source,
                 const std::vector<std::pair<std::string, std::string>>& keys, std::string& why) {
    std::string out(text);
    for (const auto& [key, value] : keys) {
        auto next = with_source_key(out, source, key, value, why);
        if (!next) return std::nullopt;
        out = std::move(*next);
    }
    // What was written must read back as meant: each key of the entry equal to its value.
    try {
        const toml::table again = toml::parse(out);
        const toml::table* src = source_table(again, source);
        bool same = src != nullptr;
        for (const auto& [key, value] : keys) {
            if (!same) break;
            const toml::table alone = toml::parse("v = " + value);
            const toml::node* got = src->get(key);
            std::ostringstream a, b; // printed alike when equal (both parsed, both inline)
            if (got != nullptr) a << toml::node_view<const toml::node>(got);
            b << alone["v"];
            same = got != nullptr && a.str() == b.str();
        }
        if (same) return out;
    } catch (const toml::parse_error&) {
    }
    why = "the edited config would not read back with the keys in place (an unusual layout); "
          "set them by hand";
    return std::nullopt;
}

std::optional<std::string>
set_source_keys(const std::filesystem::path& file, std::string_view source,
                const std::vector<std::pair<std::string, std::string>>& keys) {
    return edit_file(file, [&](const std::string& text, std::string& why) {
        return with_source_keys(text, source, keys, why);
    });
}

} // namespace meith::config
