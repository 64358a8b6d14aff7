#include "cli/session.hpp"

#include <unistd.h>

#include "cli/autostart.hpp"
#include "cli/errors.hpp"
#include "cli/process.hpp"

#include <filesystem>

#include <fmt/core.h>

namespace meith::cli {

std::string pretty(const json& j) {
    // Indented for a person at a terminal; one line for a pipe or a file (jq, scripts).
    static const bool terminal = ::isatty(STDOUT_FILENO) == 1;
    return j.dump(terminal ? 2 : -1, ' ', false, json::error_handler_t::replace);
}

std::string sanitize(std::string_view text, bool keep_newlines) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '\n' || c == '\t') {
            out.push_back(keep_newlines ? c : ' ');
        } else if (u < 0x20 || u == 0x7f) {
            out.push_back('?');
        } else {
            out.push_back(c);
        }
    }
    return out;
}

json parse_frame(const std::string& line) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !get_string(j, "type")) {
        throw cli_error(exit_error, "protocol error: meithd sent a frame that is not a JSON "
                                    "object with a \"type\"");
    }
    return j;
}

void check_error_frame(const json& frame, const std::string& request_id, int error_exit) {
    if (get_string(frame, "type") != "error") return;
    auto id = get_string(frame, "requestId");
    if (id && *id != request_id) return;
    throw cli_error(error_exit,
                    fmt::format("meithd error {}: {}",
                                get_string(frame, "code").value_or("PROTOCOL_ERROR"),
                                sanitize(get_string(frame, "message").value_or(""), false)));
}

json await_reply(protocol::client_channel& conn, const std::string& request_id,
                 std::string_view type, std::chrono::milliseconds timeout, int error_exit) {
    using channel = protocol::client_channel;
    const auto deadline = channel::clock::now() + timeout;
    for (;;) {
        channel::read_result r = conn.read_frame(deadline);
        switch (r.status) {
        case channel::read_status::frame:
            break;
        case channel::read_status::closed:
            throw cli_error(exit_error,
                            fmt::format("connection to meithd closed while waiting for {}", type));
        case channel::read_status::timed_out:
            throw cli_error(exit_error, fmt::format("no {} from meithd within {} s", type,
                                                    (timeout.count() + 999) / 1000));
        case channel::read_status::woken:
            continue; // no wake fd given; cannot happen
        }
        json frame = parse_frame(r.frame);
        check_error_frame(frame, request_id, error_exit);
        if (get_string(frame, "requestId") == request_id && get_string(frame, "type") == type) {
            return frame;
        }
    }
}

session open_session(const options& opts) {
    daemon_connection c = connect_daemon(opts);
    session s{std::move(c.where), std::move(c.channel),
              protocol::request_id_generator{protocol::request_id_generator::process_prefix("cli")},
              json{}};
    const std::string id = s.ids.next();
    s.conn.send_frame(protocol::encode_hello(id, opts.caller, opts.client.value_or("")));
    s.hello = await_reply(s.conn, id, "hello_result");
    return s;
}

cli_error to_cli_error(const protocol::client_error& e, const options& opts) {
    if (e.error_kind() == protocol::client_error::kind::not_running) {
        // The command that would start it here, by the paths a person can paste.
        const std::filesystem::path home = resolve_home(opts.home);
        std::string cmd = sibling_meithd().string();
        if (opts.home) cmd += " --home " + opts.home->string();
        if (opts.socket) cmd += " --socket " + opts.socket->string();
        std::error_code ec;
        std::string config;
        if (std::filesystem::exists(home / "meithd.toml", ec))
            config = fmt::format(" (it reads {})", display_path(home / "meithd.toml"));
        else
            config = fmt::format(" --config FILE (no {} yet: `meith init` writes one with the "
                                 "example tools)",
                                 display_path(home / "meithd.toml"));
        return cli_error(exit_error, fmt::format("{}; start it with: {}{} — auto-start is off "
                                                 "(--no-autostart or MEITH_NO_AUTOSTART)",
                                                 e.what(), cmd, config));
    }
    return cli_error(exit_error, e.what());
}

} // namespace meith::cli
