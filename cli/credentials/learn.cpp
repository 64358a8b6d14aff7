// learn: `meith sources learn NAME [--start | --stop] [--write]` (docs/protocol.md §15
// "Learned profiles"). meithd runs the source in its learning confinement and summarises what
// it recorded; this command shows the keys it learned as a diff of meithd.toml and writes them
// when asked (the file is edited as text: config/config_edit.hpp), then has meithd reload.
// It runs in meith-credentials beside import and update: the commands that edit the config.
#include "cli/credentials/credentials.hpp"

#include "cli/changes.hpp"
#include "cli/commands.hpp"
#include "cli/errors.hpp"
#include "cli/session.hpp"
#include "config/config_edit.hpp"

#include <iostream>

#include <fmt/core.h>

namespace meith::cli::credentials {

namespace {

/// The reply's `keys` ([[KEY, TOML], …]) as config_edit takes them.
std::vector<std::pair<std::string, std::string>> keys_of(const json& reply) {
    std::vector<std::pair<std::string, std::string>> keys;
    if (const json* list = get_field(reply, "keys"); list != nullptr && list->is_array())
        for (const json& k : *list)
            if (k.is_array() && k.size() == 2 && k[0].is_string() && k[1].is_string())
                keys.emplace_back(k[0].get<std::string>(), k[1].get<std::string>());
    return keys;
}

void print_list(const json& learned, const char* key, const char* title) {
    const json* list = get_field(learned, key);
    if (list == nullptr || !list->is_array() || list->empty()) return;
    fmt::print("  {}:\n", title);
    for (const json& item : *list)
        if (item.is_string()) fmt::print("    {}\n", sanitize(item.get<std::string>(), false));
}

} // namespace

// Stays whole (~80 lines): start, wait, stop, show, ask, write, reload — one session's steps.
int learn_source(const options& opts) {
    const std::string& name = opts.words.at(2);
    if (opts.learn_start && (opts.learn_stop || opts.write))
        throw usage_error("--start takes neither --stop nor --write: it only starts learning");
    session s = open_session(opts);
    if (!opts.learn_stop) {
        const std::string id = s.ids.next();
        s.conn.send_frame(protocol::encode_learn_source(id, name, false, opts.caller));
        const json reply = await_reply(s.conn, id, "source_learning", reply_timeout);
        fmt::print("'{}' is learning: it restarted with writes under your home, programs and the "
                   "network allowed, and what it does is recorded in {}\n",
                   sanitize(name, false),
                   sanitize(get_string(reply, "record").value_or("?"), false));
        if (opts.learn_start) {
            fmt::print("use it now; then `meith sources learn {} --stop` shows what it needs\n",
                       sanitize(name, false));
            return exit_ok;
        }
        fmt::print("use it now (through your agent, or `meith call`); press Enter when done\n");
        std::string line;
        std::getline(std::cin, line);
    }
    const std::string id = s.ids.next();
    s.conn.send_frame(protocol::encode_learn_source(id, name, true, opts.caller));
    const json reply = await_reply(s.conn, id, "source_learned", reply_timeout);
    if (opts.json && !opts.write) {
        fmt::print("{}\n", pretty(reply));
        return exit_ok;
    }
    const json* learned = get_field(reply, "learned");
    const json none = json::object();
    const json& l = learned != nullptr && learned->is_object() ? *learned : none;
    const json* lines = get_field(l, "lines");
    fmt::print("'{}' is back in its own sandbox. It did {} distinct things:\n",
               sanitize(name, false),
               lines != nullptr && lines->is_number_unsigned() ? lines->get<std::size_t>() : 0);
    print_list(l, "write", "wrote in");
    print_list(l, "exec", "ran");
    print_list(l, "sockets", "connected to the sockets");
    print_list(l, "network", "reached");
    print_list(l, "notes", "note");
    if (const json* t = get_field(l, "truncated");
        t != nullptr && t->is_boolean() && t->get<bool>())
        fmt::print("  (the record reached its bound: what came after is not in it)\n");
    const std::string file = get_string(reply, "config").value_or("");
    if (file.empty()) {
        fmt::print("meithd runs on its built-in defaults: no config file to write these to\n");
        return exit_ok;
    }
    const auto before = read_whole_file(file);
    if (!before) throw cli_error(exit_error, fmt::format("cannot read {}", file));
    std::string why;
    const auto after = config::with_source_keys(*before, name, keys_of(reply), why);
    if (!after)
        throw cli_error(exit_error,
                        fmt::format("cannot apply what it learned to {}: {}", file, why));
    if (*after == *before) {
        fmt::print("{} already says this: nothing to change\n", file);
        return exit_ok;
    }
    fmt::print("\n{}", unified_diff(*before, *after, file));
    if (!opts.write && !confirm(fmt::format("write this to {}?", file))) {
        fmt::print("nothing written (`--write` writes it without asking)\n");
        return exit_ok;
    }
    if (auto err = config::set_source_keys(file, name, keys_of(reply)))
        throw cli_error(exit_error, *err);
    fmt::print("written; reloading\n");
    return run_reload(opts);
}

} // namespace meith::cli::credentials
