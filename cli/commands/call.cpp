// call: one tool_call, its events as they arrive, then its result. The first Ctrl-C sends
// cancel_tool_call and keeps waiting for the (CANCELLED) result; a second one exits at once.
#include "cli/commands.hpp"

#include "cli/errors.hpp"
#include "cli/help.hpp"
#include "cli/session.hpp"

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

namespace meith::cli {

namespace {

int sigint_write_fd = -1; // written once before the handler is installed

void on_sigint(int) {
    const int saved = errno;
    const char byte = 'i';
    [[maybe_unused]] ssize_t n = ::write(sigint_write_fd, &byte, 1);
    errno = saved;
}

/// Self-pipe for SIGINT while a call is in flight; restores the previous handler on exit.
class sigint_pipe {
  public:
    sigint_pipe() {
        if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
            throw cli_error(exit_error, "pipe2 failed");
        }
        sigint_write_fd = fds_[1];
        struct sigaction sa {};
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = 0; // no SA_RESTART: poll() must return EINTR promptly
        ::sigaction(SIGINT, &sa, &old_);
    }
    ~sigint_pipe() {
        ::sigaction(SIGINT, &old_, nullptr);
        sigint_write_fd = -1;
        ::close(fds_[0]);
        ::close(fds_[1]);
    }
    sigint_pipe(const sigint_pipe&) = delete;
    sigint_pipe& operator=(const sigint_pipe&) = delete;

    int read_fd() const { return fds_[0]; }

    /// Number of SIGINTs delivered since the last call.
    int drain() {
        char buf[64];
        int count = 0;
        ssize_t n;
        while ((n = ::read(fds_[0], buf, sizeof(buf))) > 0)
            count += static_cast<int>(n);
        return count;
    }

  private:
    int fds_[2] = {-1, -1};
    struct sigaction old_ {};
};

/// The text payload of `--text PATH` (`-`: standard input), which must be UTF-8.
std::string read_text_payload(const std::string& path) {
    std::string text;
    if (path == "-") {
        std::ostringstream in;
        in << std::cin.rdbuf();
        text = in.str();
    } else {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw cli_error(exit_error, fmt::format("cannot read --text {}", path));
        std::ostringstream buf;
        buf << in.rdbuf();
        text = buf.str();
    }
    return text;
}

/// The arguments of `call` / `preview`: the third word as JSON, `-` for JSON on standard input,
/// `@FILE` for JSON in FILE (no argv size limit for either); none: {}.
json parse_arguments(const options& opts) {
    if (opts.words.size() < 3) return json::object();
    const std::string& word = opts.words[2];
    std::string text;
    std::string from = "arguments";
    if (word == "-") {
        text = read_text_payload("-");
        from = "arguments on standard input";
    } else if (word.starts_with("@")) {
        const std::string path = word.substr(1);
        if (path.empty()) throw usage_error("@FILE needs a file name: @args.json");
        std::ifstream in(path, std::ios::binary);
        if (!in)
            throw cli_error(exit_error,
                            fmt::format("cannot read {}: {}", path, std::strerror(errno)));
        std::ostringstream buf;
        buf << in.rdbuf();
        text = buf.str();
        from = fmt::format("arguments in {}", path);
    } else {
        text = word;
    }
    json args;
    try {
        args = json::parse(text);
    } catch (const json::parse_error& e) {
        std::string what = e.what();
        // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
        if (auto pos = what.find("] "); pos != std::string::npos) what.erase(0, pos + 2);
        throw cli_error(exit_error, fmt::format("{} are not valid JSON: {}", from, what));
    }
    if (!args.is_object()) {
        throw cli_error(exit_error,
                        fmt::format("{} must be a JSON object, not {}", from, args.type_name()));
    }
    return args;
}

/// `--raw`: the result's text as is. A string; an object's "content" or "text" string (a file
/// tool's answer); MCP content blocks' text joined; anything else as one line of JSON.
void print_raw(const json& content) {
    if (content.is_string()) {
        fmt::print("{}", content.get_ref<const std::string&>());
        return;
    }
    if (content.is_object()) {
        for (const char* key : {"content", "text"}) {
            const json* v = get_field(content, key);
            if (v != nullptr && v->is_string()) {
                fmt::print("{}", v->get_ref<const std::string&>());
                return;
            }
        }
        const json* blocks = get_field(content, "content");
        if (blocks != nullptr && blocks->is_array()) {
            std::string text;
            bool all_text = !blocks->empty();
            for (const json& b : *blocks) {
                const json* t = get_field(b, "text");
                if (get_string(b, "type") != "text" || t == nullptr || !t->is_string()) {
                    all_text = false;
                    break;
                }
                text += t->get_ref<const std::string&>();
            }
            if (all_text) {
                fmt::print("{}", text);
                return;
            }
        }
    }
    fmt::print("{}\n", compact(content));
}

/// "; did you mean 'read_file'?" for a tool name meithd does not know, from its tool list.
std::string suggest_tool(session& s, const std::string& tool) {
    try {
        const std::string id = s.ids.next();
        s.conn.send_frame(protocol::encode_list_tools(id));
        const json reply = await_reply(s.conn, id, "tools_list");
        std::vector<std::string> names;
        if (const json* tools = get_field(reply, "tools"); tools && tools->is_array())
            for (const json& t : *tools)
                if (auto n = get_string(t, "name")) names.push_back(sanitize(*n, false));
        return did_you_mean(closest_names(tool, names));
    } catch (const std::exception&) {
        return ""; // a suggestion is a nicety: never worse than no suggestion
    }
}

void print_event(const json& event) {
    const std::string type = get_string(event, "type").value_or("?");
    if (type == "part") {
        const json* payload = get_field(event, "payload");
        fmt::print(stderr, "[part] {}\n", payload ? compact(*payload) : "null");
    } else if (type == "progress") {
        std::string line = "[progress]";
        if (const json* f = get_field(event, "fraction"); f && f->is_number()) {
            line += fmt::format(" {}%", std::lround(f->get<double>() * 100.0));
        }
        if (auto msg = get_string(event, "message")) line += " " + sanitize(*msg, false);
        fmt::print(stderr, "{}\n", line);
    } else if (type == "log") {
        fmt::print(stderr, "[log {}] {}\n",
                   sanitize(get_string(event, "level").value_or("info"), false),
                   sanitize(get_string(event, "message").value_or(""), true));
    } else if (type == "partial_text") {
        fmt::print(stderr, "[partial_text] {}\n",
                   sanitize(get_string(event, "text").value_or(""), true));
    } else if (type == "artifact") {
        // Artifacts may carry large inline data; name the artifact instead of dumping it.
        std::string line =
            "[artifact] " + sanitize(get_string(event, "mimeType").value_or("?"), false);
        if (auto name = get_string(event, "name")) line += " " + sanitize(*name, false);
        fmt::print(stderr, "{}\n", line);
    } else if (type == "approval_pending") {
        // Held for a person (docs/protocol.md §14): say so, or the terminal looks hung.
        fmt::print(stderr, "[approval] {} ({})\n",
                   sanitize(get_string(event, "message").value_or("waiting for approval"), false),
                   sanitize(get_string(event, "approvalId").value_or("?"), false));
    } else {
        fmt::print(stderr, "[{}] {}\n", sanitize(type, false), compact(event));
    }
}

int print_result(const json& result, const options& opts) {
    const bool as_json = opts.json;
    const json* ok = get_field(result, "ok");
    if (ok == nullptr || !ok->is_boolean()) {
        throw cli_error(exit_error, "protocol error: tool_result without a boolean \"ok\"");
    }
    if (as_json) {
        fmt::print("{}\n", pretty(result));
        return ok->get<bool>() ? exit_ok : exit_tool_failed;
    }
    if (const json* diags = get_field(result, "diagnostics"); diags && diags->is_array()) {
        for (const json& d : *diags) {
            fmt::print(stderr, "[diagnostic {}] {}\n",
                       sanitize(get_string(d, "level").value_or("info"), false),
                       sanitize(get_string(d, "message").value_or(""), true));
        }
    }
    if (ok->get<bool>()) {
        const json* content = get_field(result, "content");
        if (content == nullptr || content->is_null()) return exit_ok;
        if (opts.raw) {
            print_raw(*content);
            return exit_ok;
        }
        if (content->is_string()) {
            const std::string& text = content->get_ref<const std::string&>();
            fmt::print("{}{}", text, !text.empty() && text.back() != '\n' ? "\n" : "");
        } else {
            fmt::print("{}\n", pretty(*content));
        }
        return exit_ok;
    }
    const json* error = get_field(result, "error");
    const json empty = json::object();
    if (error == nullptr) error = &empty;
    fmt::print(stderr, "error {}: {}\n", sanitize(get_string(*error, "code").value_or("?"), false),
               sanitize(get_string(*error, "message").value_or(""), true));
    if (const json* details = get_field(*error, "details"); details && !details->is_null()) {
        fmt::print(stderr, "  details: {}\n", compact(*details));
    }
    return exit_tool_failed;
}

} // namespace

namespace {

/// The call's arguments as compact JSON, checked before connecting: bad input is never sent.
/// --text: a text payload (docs/protocol.md §13).
std::string call_arguments(const options& opts) {
    if (opts.text && opts.words.size() > 2)
        throw usage_error("give the arguments as JSON or as --text, not both");
    if (opts.words.size() > 2 && opts.words[2] == "-" && opts.text && *opts.text == "-")
        throw usage_error("standard input can be read once: not both - and --text -");
    return opts.text ? compact(json(read_text_payload(*opts.text)))
                     : compact(parse_arguments(opts));
}

/// Prints a call's tool_result as the options ask; returns the exit status.
int show_result(const json& result, const options& opts, session& s, const std::string& tool,
                bool cancelled) {
    const auto ok_status = [&] {
        const json* ok = get_field(result, "ok");
        return ok && ok->is_boolean() && ok->get<bool>() ? exit_ok : exit_tool_failed;
    };
    if (opts.display && !opts.json) {
        // What a UI would render (docs/protocol.md §13): meta.display.
        const json* meta = get_field(result, "meta");
        const json* display = meta ? get_field(*meta, "display") : nullptr;
        if (display != nullptr) fmt::print("{}\n", pretty(*display));
        return ok_status();
    }
    if (opts.model && !opts.json) {
        // What the model would be given (docs/protocol.md §13): modelContent.
        const json* model = get_field(result, "modelContent");
        if (model != nullptr && model->is_string())
            fmt::print("{}\n", sanitize(model->get<std::string>(), true));
        else if (model != nullptr)
            fmt::print("{}\n", pretty(*model));
        return ok_status();
    }
    int status = print_result(result, opts);
    // Ctrl-C ended it: the shell's convention for a command stopped by SIGINT.
    if (cancelled) status = exit_interrupted;
    const json* error = get_field(result, "error");
    if (!opts.json && error != nullptr && get_string(*error, "code") == "UNKNOWN_TOOL")
        if (auto hint = suggest_tool(s, tool); !hint.empty())
            fmt::print(stderr, "meith: no tool '{}'{}\n", sanitize(tool, false), hint);
    return status;
}

} // namespace

int run_call(const options& opts) {
    const std::string& tool = opts.words.at(1);
    const std::string args_text = call_arguments(opts);

    session s = open_session(opts);
    sigint_pipe interrupts;

    const std::string id = s.ids.next();
    s.conn.send_frame(protocol::encode_tool_call({.request_id = id,
                                                  .tool_name = tool,
                                                  .arguments_json = args_text,
                                                  .timeout_ms = opts.timeout_ms,
                                                  .caller = opts.caller,
                                                  .result_model = opts.model,
                                                  .display = opts.display}));

    bool cancel_sent = false;
    for (;;) {
        auto r = s.conn.read_frame(std::nullopt, interrupts.read_fd());
        if (r.status == protocol::client_channel::read_status::woken) {
            const int count = interrupts.drain();
            if (count == 0) continue;
            if (cancel_sent || count > 1) {
                throw cli_error(exit_interrupted, "interrupted; not waiting for the result");
            }
            fmt::print(stderr, "cancelling… (Ctrl-C again to quit now)\n");
            s.conn.send_frame(protocol::encode_cancel_tool_call(id));
            cancel_sent = true;
            continue;
        }
        if (r.status != protocol::client_channel::read_status::frame) {
            throw cli_error(exit_error, "connection to meithd closed before the result arrived");
        }

        const json msg = parse_frame(r.frame);
        check_error_frame(msg, id);
        if (get_string(msg, "requestId") != id) continue;
        const std::string type = get_string(msg, "type").value_or("");
        if (type == "tool_event") {
            if (const json* event = get_field(msg, "event"); event && event->is_object()) {
                print_event(*event);
            }
        } else if (type == "tool_result") {
            const json* result = get_field(msg, "result");
            if (result == nullptr || !result->is_object()) {
                throw cli_error(exit_error, "protocol error: tool_result without a \"result\"");
            }
            return show_result(*result, opts, s, tool, cancel_sent);
        }
    }
}

} // namespace meith::cli

namespace meith::cli {

int run_preview(const options& opts) {
    // docs/protocol.md §13: what the call would do, without running it.
    const std::string& tool = opts.words.at(1);
    if (opts.text && opts.words.size() > 2)
        throw usage_error("give the arguments as JSON or as --text, not both");
    const json arguments = opts.text ? json(read_text_payload(*opts.text)) : parse_arguments(opts);
    session s = open_session(opts);
    const std::string id = s.ids.next();
    s.conn.send_frame(compact(json{{"type", "preview_tool_call"},
                                   {"protocol", 1},
                                   {"requestId", id},
                                   {"toolName", tool},
                                   {"arguments", arguments}}));
    const json reply = await_reply(s.conn, id, "tool_preview");
    const std::string permission = get_string(reply, "permission").value_or("deny");
    if (opts.json) {
        fmt::print("{}\n", pretty(reply));
    } else {
        fmt::print("{}\n", sanitize(get_string(reply, "text").value_or(""), true));
        if (permission == "ask")
            fmt::print(stderr,
                       "meith: a call of {} by caller {} would be held for a person's approval "
                       "(meith approve)\n",
                       sanitize(tool, false), opts.caller);
        else if (permission != "allow")
            fmt::print(stderr, "meith: a call of {} would be denied for caller {}\n",
                       sanitize(tool, false), opts.caller);
    }
    return permission == "allow" ? exit_ok : exit_tool_failed;
}

} // namespace meith::cli
