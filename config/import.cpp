// import: other clients' MCP server entries read and written as meith sources
// (config/import.hpp).
#include "config/import.hpp"

#include "protocol/json_writer.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

namespace meith::config::import {

namespace {

using json = nlohmann::ordered_json;

std::string upper(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

std::string text_of(const json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_null()) return {};
    return v.dump();
}

/// A `command` given as one string with spaces and no `args` ("npx -y pkg"): split on blanks.
std::vector<std::string> split_words(std::string_view s) {
    std::vector<std::string> out;
    std::string word;
    for (char c : s) {
        if (c == ' ' || c == '\t') {
            if (!word.empty()) out.push_back(std::move(word));
            word.clear();
        } else {
            word += c;
        }
    }
    if (!word.empty()) out.push_back(std::move(word));
    return out;
}

bool is_container_runtime(const std::vector<std::string>& command) {
    if (command.empty()) return false;
    const std::string program = command[0].substr(command[0].rfind('/') + 1);
    return program == "docker" || program == "podman" || program == "nerdctl";
}

/// One entry of an `mcpServers` or `servers` object.
server_entry entry_of(const std::string& name, const json& e) {
    server_entry s;
    s.name = name;
    if (!e.is_object()) {
        s.off_reason = "its entry is not a JSON object";
        return s;
    }
    const std::string type = e.contains("type") ? text_of(e["type"]) : "";
    for (const char* key : {"url", "serverUrl", "httpUrl"})
        if (e.contains(key) && e[key].is_string()) s.url = e[key].get<std::string>();
    if (e.contains("command")) {
        const std::string program = text_of(e["command"]);
        const bool has_args = e.contains("args") && e["args"].is_array() && !e["args"].empty();
        s.command = has_args ? std::vector<std::string>{program} : split_words(program);
        if (has_args)
            for (const auto& a : e["args"])
                s.command.push_back(text_of(a));
    }
    if (e.contains("env") && e["env"].is_object())
        for (const auto& [k, v] : e["env"].items())
            s.env[k] = text_of(v);
    if (e.contains("cwd") && e["cwd"].is_string()) s.cwd = e["cwd"].get<std::string>();
    if (e.contains("headers") && e["headers"].is_object())
        for (const auto& [k, v] : e["headers"].items())
            s.headers[k] = text_of(v);
    if ((e.contains("disabled") && e["disabled"] == true) ||
        (e.contains("enabled") && e["enabled"] == false))
        s.off_reason = "the client's config has it switched off";
    else if (s.command.empty() && s.url.empty())
        s.off_reason = "it has neither a `command` nor a `url`";
    else if (type == "sse" || (s.command.empty() && s.url.ends_with("/sse")))
        s.off_reason = "it speaks the old HTTP+SSE transport; meith connects to Streamable HTTP "
                       "endpoints (ask the server for its /mcp URL)";
    else if (is_container_runtime(s.command))
        s.off_reason = "it runs in a container (" + s.command[0] +
                       "); meith runs each server as a confined process of its own, not in a "
                       "container: install the server and point `command` at it";
    return s;
}

void read_servers(const json& servers, std::vector<server_entry>& out) {
    if (!servers.is_object()) return;
    for (const auto& [name, e] : servers.items()) {
        server_entry s = entry_of(name, e);
        // The same server in two of Claude Code's projects: one entry; another under the same
        // name: its own, numbered.
        const auto same = std::find_if(out.begin(), out.end(),
                                       [&](const server_entry& o) { return o.name == s.name; });
        if (same != out.end()) {
            if (same->command == s.command && same->url == s.url && same->env == s.env) continue;
            for (int n = 2;; ++n) {
                const std::string candidate = name + "-" + std::to_string(n);
                if (std::none_of(out.begin(), out.end(),
                                 [&](const server_entry& o) { return o.name == candidate; })) {
                    s.name = candidate;
                    break;
                }
            }
        }
        out.push_back(std::move(s));
    }
}

std::vector<server_entry> read_codex(std::string_view text, std::string& why) {
    std::vector<server_entry> out;
    toml::table doc;
    try {
        doc = toml::parse(text);
    } catch (const toml::parse_error& e) {
        why = std::string("not a TOML file: ") + std::string(e.description());
        return out;
    }
    const auto* servers = doc["mcp_servers"].as_table();
    if (!servers) {
        why = "no [mcp_servers] table (Codex's config.toml keeps its servers there)";
        return out;
    }
    for (auto&& [k, v] : *servers) {
        const auto* t = v.as_table();
        server_entry s;
        s.name = std::string(k.str());
        if (!t) {
            s.off_reason = "its entry is not a table";
            out.push_back(std::move(s));
            continue;
        }
        if (auto c = (*t)["command"].value<std::string>()) s.command.push_back(*c);
        if (const auto* args = (*t)["args"].as_array())
            for (auto&& a : *args)
                if (auto str = a.value<std::string>()) s.command.push_back(*str);
        if (const auto* env = (*t)["env"].as_table())
            for (auto&& [ek, ev] : *env)
                if (auto str = ev.value<std::string>()) s.env[std::string(ek.str())] = *str;
        if (auto cwd = (*t)["cwd"].value<std::string>()) s.cwd = *cwd;
        if (auto url = (*t)["url"].value<std::string>()) s.url = *url;
        for (const char* key : {"http_headers", "headers"})
            if (const auto* h = (*t)[key].as_table())
                for (auto&& [hk, hv] : *h)
                    if (auto str = hv.value<std::string>()) s.headers[std::string(hk.str())] = *str;
        if ((*t)["enabled"].value<bool>() == false)
            s.off_reason = "the client's config has it switched off";
        else if (s.command.empty() && s.url.empty())
            s.off_reason = "it has neither a `command` nor a `url`";
        else if (is_container_runtime(s.command))
            s.off_reason = "it runs in a container (" + s.command[0] +
                           "); meith runs each server as a confined process of its own";
        out.push_back(std::move(s));
    }
    return out;
}

/// A TOML basic string (toml.io: the escapes of JSON are TOML's too, except `\/`, which
/// json_writer does not write).
std::string toml_string(std::string_view s) {
    std::string out;
    protocol::append_json_string(out, s);
    return out;
}

/// A bare TOML key, or a quoted one.
std::string toml_key(std::string_view k) {
    const bool bare = !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
    });
    return bare ? std::string(k) : toml_string(k);
}

std::string inline_table(const std::map<std::string, std::string>& m) {
    std::string out = "{ ";
    bool first = true;
    for (const auto& [k, v] : m) {
        if (!first) out += ", ";
        first = false;
        out += toml_key(k) + " = " + toml_string(v);
    }
    return out + " }";
}

/// Where the entry named `name` starts and ends in `text`: from the comment lines right above
/// its `[[sources]]` header to the next table header (or the end).
std::optional<std::pair<std::size_t, std::size_t>> entry_span(std::string_view text,
                                                              std::string_view name) {
    std::vector<std::size_t> starts; // line starts
    for (std::size_t i = 0; i < text.size();) {
        starts.push_back(i);
        const auto nl = text.find('\n', i);
        i = nl == std::string_view::npos ? text.size() : nl + 1;
    }
    const auto line = [&](std::size_t n) {
        const std::size_t b = starts[n];
        const std::size_t e = n + 1 < starts.size() ? starts[n + 1] : text.size();
        std::string_view l = text.substr(b, e - b);
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r'))
            l.remove_suffix(1);
        return l;
    };
    const auto trimmed = [](std::string_view l) {
        while (!l.empty() && (l.front() == ' ' || l.front() == '\t'))
            l.remove_prefix(1);
        return l;
    };
    const std::string wanted = "name = " + toml_string(name);
    for (std::size_t n = 0; n < starts.size(); ++n) {
        if (trimmed(line(n)) != "[[sources]]") continue;
        std::size_t end = n + 1;
        bool named = false;
        for (; end < starts.size(); ++end) {
            const auto l = trimmed(line(end));
            if (l.starts_with("[")) break;
            if (l == wanted || l == "name = '" + std::string(name) + "'") named = true;
        }
        if (!named) continue;
        std::size_t begin = n;
        while (begin > 0 && trimmed(line(begin - 1)).starts_with("#"))
            --begin;
        // The entry's own trailing comments (the next entry's opening lines) stay with it.
        std::size_t stop = end;
        while (stop > n + 1 && (trimmed(line(stop - 1)).empty() ||
                                (stop < starts.size() && trimmed(line(stop - 1)).starts_with("#"))))
            --stop;
        return std::pair{starts[begin], stop < starts.size() ? starts[stop] : text.size()};
    }
    return std::nullopt;
}

} // namespace

std::vector<server_entry> read_client_config(std::string_view text, bool toml, std::string& why) {
    if (toml) return read_codex(text, why);
    std::vector<server_entry> out;
    json doc = json::parse(text, nullptr, false, true); // comments allowed (VS Code's JSONC)
    if (doc.is_discarded() || !doc.is_object()) {
        why = "not a JSON object";
        return out;
    }
    const bool any =
        doc.contains("mcpServers") || doc.contains("servers") || doc.contains("projects");
    if (!any) {
        why = "no \"mcpServers\" (Claude, Cursor, Gemini CLI, Windsurf) or \"servers\" (VS "
              "Code) object in it";
        return out;
    }
    if (doc.contains("mcpServers")) read_servers(doc["mcpServers"], out);
    if (doc.contains("servers")) read_servers(doc["servers"], out);
    if (doc.contains("projects") && doc["projects"].is_object())
        for (const auto& [path, project] : doc["projects"].items())
            if (project.is_object() && project.contains("mcpServers"))
                read_servers(project["mcpServers"], out);
    return out;
}

bool argument_holds_credential(std::string_view v) {
    // A URL with a password: scheme://user:password@host.
    if (const auto scheme = v.find("://"); scheme != std::string_view::npos) {
        const auto rest = v.substr(scheme + 3);
        const auto at = rest.find('@');
        const auto slash = rest.find('/');
        if (at != std::string_view::npos && (slash == std::string_view::npos || at < slash)) {
            const auto colon = rest.substr(0, at).find(':');
            if (colon != std::string_view::npos && colon + 1 < at) return true;
        }
    }
    static constexpr std::array prefixes{"ghp_",   "gho_",     "ghu_",   "ghs_",     "github_pat_",
                                         "sk-",    "sk_live_", "xoxb-",  "xoxp-",    "xoxa-",
                                         "glpat-", "AKIA",     "AIza",   "pk_live_", "rk_live_",
                                         "npm_",   "hf_",      "sk-ant-"};
    for (const char* p : prefixes)
        if (v.starts_with(p) && v.size() >= std::string_view(p).size() + 12) return true;
    return false;
}

bool holds_credential(std::string_view name, std::string_view value) {
    if (value.empty() || value.find("${") != std::string_view::npos) return false;
    const std::string n = upper(name);
    static constexpr std::array contains{"SECRET",  "PASSWORD", "PASSWD",      "CREDENTIAL",
                                         "API_KEY", "APIKEY",   "PRIVATE_KEY", "ACCESS_KEY"};
    for (const char* c : contains)
        if (n.find(c) != std::string::npos) return true;
    for (const char* suffix : {"_TOKEN", "_KEY", "_PAT", "_AUTH"})
        if (n.ends_with(suffix)) return true;
    if (n == "TOKEN" || n == "AUTHORIZATION" || n == "COOKIE" || n == "PROXY-AUTHORIZATION" ||
        n == "X-API-KEY")
        return true;
    if (argument_holds_credential(value)) return true;
    // 24 or more letters and digits, both, with nothing else but '-', '_', '.': a key's shape,
    // not a path, a URL or words.
    if (value.size() < 24) return false;
    bool letter = false, digit = false;
    for (char c : value) {
        if (std::isdigit(static_cast<unsigned char>(c)) != 0)
            digit = true;
        else if (std::isalpha(static_cast<unsigned char>(c)) != 0)
            letter = true;
        else if (c != '-' && c != '_' && c != '.')
            return false;
    }
    return letter && digit;
}

std::string source_name(std::string_view name) {
    std::string out;
    for (char c : name) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) != 0)
            out += static_cast<char>(std::tolower(u));
        else if (c == '_' || c == '-')
            out += c;
        else if (!out.empty() && out.back() != '-')
            out += '-';
        if (out.size() == 48) break;
    }
    while (!out.empty() && (out.back() == '-' || out.back() == '_'))
        out.pop_back();
    while (!out.empty() && (out.front() == '-' || out.front() == '_'))
        out.erase(out.begin());
    return out.empty() ? "server" : out;
}

std::optional<launcher_run> launcher_of(const std::vector<std::string>& command) {
    if (command.empty()) return std::nullopt;
    const std::string program = command[0].substr(command[0].rfind('/') + 1);
    launcher_run r;
    std::size_t i = 1;
    if (program == "npx") {
        r.launcher = "npx";
    } else if (program == "bunx") {
        r.launcher = "bunx";
    } else if (program == "npm" && command.size() > 1 && command[1] == "exec") {
        r.launcher = "npm exec";
        i = 2;
    } else if (program == "pnpm" && command.size() > 1 && command[1] == "dlx") {
        r.launcher = "pnpm dlx";
        i = 2;
    } else {
        return std::nullopt;
    }
    for (; i < command.size(); ++i) {
        const std::string& a = command[i];
        if (a == "-y" || a == "--yes" || a == "--quiet" || a == "-q" || a == "--silent" ||
            a == "--prefer-offline")
            continue;
        if ((a == "-p" || a == "--package") && i + 1 < command.size()) {
            r.package = command[++i];
            continue;
        }
        if (a.starts_with("--package=")) {
            r.package = a.substr(10);
            continue;
        }
        if (a == "--") continue;
        if (a.starts_with("-")) return std::nullopt; // an option this does not know
        if (r.package.empty()) {
            r.package = a;
        } else if (package_name(r.package) != package_name(a) && r.args.empty()) {
            // `npx -p PKG BIN ARGS`: BIN is a command of PKG. Not pinned by this reading.
            return std::nullopt;
        }
        r.args.assign(command.begin() + static_cast<std::ptrdiff_t>(i) + 1, command.end());
        return r;
    }
    return r.package.empty() ? std::nullopt : std::optional(r);
}

std::string package_name(std::string_view spec) {
    const auto at = spec.find('@', spec.starts_with("@") ? 1 : 0);
    return std::string(at == std::string_view::npos ? spec : spec.substr(0, at));
}

std::vector<std::string> profile_for_package(std::string_view name) {
    // Each starts Chromium (or Chrome, Firefox) as its child and keeps the browser's profile
    // under the user's cache: more than any of its tools' declarations says.
    static constexpr std::array<std::string_view, 5> browsers{
        "@playwright/mcp", "chrome-devtools-mcp", "@modelcontextprotocol/server-puppeteer",
        "puppeteer-mcp-server", "@browsermcp/mcp"};
    if (std::find(browsers.begin(), browsers.end(), name) != browsers.end()) return {"browser"};
    return {};
}

std::vector<std::string> browser_args_for_package(std::string_view name) {
    if (name == "chrome-devtools-mcp") return {"--chrome-arg=--no-sandbox"};
    return {};
}

std::string source_toml(const source_plan& p) {
    std::string out;
    for (const auto& c : p.comments)
        out += "# " + c + "\n";
    std::string body = "[[sources]]\nname = " + toml_string(p.name) + "\nkind = \"mcp\"\n";
    if (!p.url.empty()) {
        body += "url = " + toml_string(p.url) + "\n";
        if (p.allow_private_network) body += "allow_private_network = true\n";
        if (!p.headers.empty()) body += "headers = " + inline_table(p.headers) + "\n";
    } else {
        body += "command = [";
        for (std::size_t i = 0; i < p.command.size(); ++i)
            body += (i ? ", " : "") + toml_string(p.command[i]);
        body += "]\n";
        if (!p.cwd.empty()) body += "cwd = " + toml_string(p.cwd) + "\n";
        if (!p.env.empty()) body += "env = " + inline_table(p.env) + "\n";
    }
    if (!p.prefix.empty()) body += "prefix = " + toml_string(p.prefix) + "\n";
    if (p.trust_annotations) body += "trust_annotations = true\n";
    if (!p.profile.empty()) {
        body += "profile = [";
        for (std::size_t i = 0; i < p.profile.size(); ++i)
            body += (i ? ", " : "") + toml_string(p.profile[i]);
        body += "]\n";
    }
    if (p.per_session) body += "instances = \"per-session\"\n";
    if (p.off_reason.empty()) return out + body;
    out += "# Not imported to run: " + p.off_reason + "\n";
    for (std::size_t i = 0; i < body.size();) {
        const auto nl = body.find('\n', i);
        out += "# " + body.substr(i, nl - i + 1);
        i = nl + 1;
    }
    return out;
}

std::string with_source_entry(std::string_view text, std::string_view name, std::string_view entry,
                              bool& replaced) {
    replaced = false;
    if (const auto span = entry_span(text, name)) {
        replaced = true;
        std::string out(text.substr(0, span->first));
        out += entry;
        out += text.substr(span->second);
        return out;
    }
    std::string out(text);
    if (!out.empty() && out.back() != '\n') out += '\n';
    if (!out.empty()) out += '\n';
    out += entry;
    return out;
}

std::optional<std::string> source_entry_text(std::string_view text, std::string_view name) {
    const auto span = entry_span(text, name);
    if (!span) return std::nullopt;
    return std::string(text.substr(span->first, span->second - span->first));
}

} // namespace meith::config::import
