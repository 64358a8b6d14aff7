// mcp_bridge: `meith mcp` — the registry as an MCP server on stdio (docs/protocol.md §10).
//
// One JSON-RPC 2.0 message a line on stdin and stdout (MCP stdio transport), nothing else on
// stdout, logs on stderr. Each MCP request becomes socket frames to meithd on one connection
// (hello subscribed to `tools_changed`); many requests are in flight at once, matched to their
// replies by requestId. One thread: the daemon's channel is read with stdin as its wake fd, so
// neither side can starve the other. When meithd does not answer, every request gets a
// JSON-RPC error that says how to start it, and the bridge tries again on the next request:
// it never hangs.
#include "cli/autostart.hpp"
#include "cli/commands.hpp"
#include "cli/discovery.hpp"
#include "cli/session.hpp"

#include <array>
#include <cerrno>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/core.h>
#include <poll.h>

namespace meith::cli {

namespace {

/// MCP revisions this bridge speaks, newest first (docs/protocol.md §10).
constexpr std::array<std::string_view, 4> revisions = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                       "2024-11-05"};
constexpr std::size_t page_size = 500;     ///< tools per tools/list page (docs/protocol.md §10)
constexpr std::size_t max_line = 64 << 20; ///< longest stdin message accepted

// JSON-RPC 2.0 error codes.
constexpr int parse_error = -32700;
constexpr int invalid_request = -32600;
constexpr int method_not_found = -32601;
constexpr int invalid_params = -32602;
constexpr int internal_error = -32603;

class bridge {
  public:
    explicit bridge(const options& o)
        : opts_(o), caller_(o.caller_given ? o.caller : "plugin"),
          ids_(protocol::request_id_generator::process_prefix("mcp")) {}

    int run() {
        connect(); // failures are answered per request
        for (;;) {
            while (auto line = next_stdin_line())
                handle_message(*line);
            if (in_eof_) return exit_ok; // the client closed our stdin: the session is over
            if (conn_) {
                const auto r = conn_->read_frame(std::nullopt, STDIN_FILENO);
                if (r.status == protocol::client_channel::read_status::frame) {
                    on_daemon_frame(r.frame);
                } else if (r.status == protocol::client_channel::read_status::closed) {
                    daemon_gone("meithd closed the connection");
                } else if (r.status == protocol::client_channel::read_status::woken) {
                    read_stdin();
                }
            } else {
                pollfd p{STDIN_FILENO, POLLIN, 0};
                if (::poll(&p, 1, -1) > 0) read_stdin();
            }
        }
    }

  private:
    // ---- stdin / stdout -------------------------------------------------------------------

    void read_stdin() {
        char buf[65536];
        const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
        if (n > 0)
            in_.append(buf, static_cast<std::size_t>(n));
        else if (n == 0 || (errno != EINTR && errno != EAGAIN))
            in_eof_ = true;
    }

    std::optional<std::string> next_stdin_line() {
        for (;;) {
            const auto nl = in_.find('\n');
            if (nl == std::string::npos) {
                if (in_.size() > max_line) { // a message we will not hold: drop it, say so
                    in_.clear();
                    send_error(nullptr, parse_error, "message longer than 64 MiB");
                }
                return std::nullopt;
            }
            std::string line = in_.substr(0, nl);
            in_.erase(0, nl + 1);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (!line.empty()) return line;
        }
    }

    static void write_stdout(const json& msg) {
        std::string text = compact(msg);
        text.push_back('\n');
        for (std::size_t done = 0; done < text.size();) {
            const ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) throw cli_error(exit_error, "stdout closed");
            done += static_cast<std::size_t>(n);
        }
    }

    static void send_result(const json& id, json result) {
        write_stdout(json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
    }

    static void send_error(const json& id, int code, const std::string& message) {
        write_stdout(json{
            {"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
    }

    static void notify(std::string_view method, json params) {
        write_stdout(json{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}});
    }

    // ---- the daemon -----------------------------------------------------------------------

    /// Connects and says hello (subscribed to tools_changed); false, with down_ set, if not.
    bool connect() {
        if (conn_) return true;
        try {
            daemon_connection dc = connect_daemon(opts_);
            protocol::client_channel ch = std::move(dc.channel);
            const std::string id = ids_.next();
            ch.send_frame(compact(json{{"type", "hello"},
                                       {"protocol", 1},
                                       {"requestId", id},
                                       {"clientInfo", {{"name", "meith mcp"}, {"caller", caller_}}},
                                       {"subscribe", {"tools_changed"}}}));
            await_reply(ch, id, "hello_result");
            conn_ = std::move(ch);
            return true;
        } catch (const protocol::client_error& e) {
            down_ = to_cli_error(e, opts_).what();
        } catch (const cli_error& e) {
            down_ = e.what();
        }
        fmt::print(stderr, "meith mcp: {}\n", down_);
        return false;
    }

    void daemon_gone(const std::string& why) {
        fmt::print(stderr, "meith mcp: {}\n", why);
        conn_.reset();
        down_ = why + (autostart_enabled(opts_) ? "; the next request starts it again"
                                                : "; start it again with: meithd");
        for (auto& [rid, p] : pending_)
            if (!p.cancelled) send_error(p.mcp_id, internal_error, down_);
        pending_.clear();
        by_mcp_id_.clear();
    }

    /// Sends `frame`; on failure the daemon is gone and the request answered with an error.
    bool send_to_daemon(const json& frame) {
        try {
            conn_->send_frame(compact(frame));
            return true;
        } catch (const protocol::client_error& e) {
            daemon_gone(e.what());
            return false;
        }
    }

    struct pending {
        json mcp_id;
        bool is_call = false;
        std::size_t offset = 0;     ///< tools/list: the page's first tool
        json progress_token;        ///< tools/call: null when the client asked for no progress
        std::uint64_t progress = 0; ///< events counted, for events that carry no progress
        bool cancelled = false;     ///< the client cancelled: its answer is not sent (MCP spec)
    };

    void on_daemon_frame(const std::string& line) {
        const json f = json::parse(line, nullptr, false);
        if (!f.is_object()) return;
        const std::string type = get_string(f, "type").value_or("");
        if (type == "tools_changed") {
            notify("notifications/tools/list_changed", json::object());
            return;
        }
        const auto rid = get_string(f, "requestId");
        auto it = rid ? pending_.find(*rid) : pending_.end();
        if (it == pending_.end()) {
            if (type == "error")
                fmt::print(stderr, "meith mcp: meithd: {}\n",
                           get_string(f, "message").value_or(""));
            return;
        }
        pending& p = it->second;
        if (type == "tool_event") {
            if (!p.cancelled && !p.progress_token.is_null()) on_event(p, f.value("event", json()));
            return;
        }
        const json mcp_id = p.mcp_id;
        const bool cancelled = p.cancelled;
        by_mcp_id_.erase(mcp_id.dump());
        if (type == "tools_list") {
            const std::size_t offset = p.offset;
            pending_.erase(it);
            send_result(mcp_id, tools_page(f.value("tools", json::array()), offset));
        } else if (type == "tool_result") {
            pending_.erase(it);
            if (!cancelled) answer_call(mcp_id, f.value("result", json::object()));
        } else if (type == "error") {
            pending_.erase(it);
            if (!cancelled)
                send_error(mcp_id, internal_error,
                           "meithd: " + get_string(f, "message").value_or("error"));
        }
    }

    void on_event(pending& p, const json& event) {
        json params{{"progressToken", p.progress_token}};
        if (event.is_object() && get_string(event, "type") == "approval_pending") {
            // The call waits for a person (docs/protocol.md §14): said as progress, so the
            // client can show it.
            params["progress"] = p.progress;
            params["message"] = get_string(event, "message").value_or("waiting for approval");
        } else if (event.is_object() && get_string(event, "type") == "progress" &&
                   event.contains("progress") && event["progress"].is_number()) {
            params["progress"] = event["progress"];
            if (event.contains("total")) params["total"] = event["total"];
            if (event.contains("message")) params["message"] = event["message"];
        } else {
            // Other events (a host's streamed parts) count up, their JSON as the message.
            p.progress += 1;
            params["progress"] = p.progress;
            params["message"] = compact(event);
        }
        notify("notifications/progress", std::move(params));
    }

    // ---- MCP ------------------------------------------------------------------------------

    /// One message from the client. Every member is read by its type (get_string, is_*), so
    /// a member of an unexpected type gets its JSON-RPC error; a slip that still throws is
    /// answered as an internal error and the session goes on (no message ends the bridge).
    void handle_message(const std::string& line) {
        const json msg = json::parse(line, nullptr, false);
        if (msg.is_discarded()) return send_error(nullptr, parse_error, "parse error: not JSON");
        try {
            dispatch_message(msg);
        } catch (const json::exception& e) {
            const json* id = get_field(msg, "id");
            send_error(id != nullptr && (id->is_string() || id->is_number_integer()) ? *id : json(),
                       internal_error, std::string("meith mcp could not handle it: ") + e.what());
        }
    }

    void dispatch_message(const json& msg) {
        if (!msg.is_object() || get_string(msg, "jsonrpc") != "2.0")
            return send_error(msg.is_object() ? msg.value("id", json()) : json(), invalid_request,
                              "not a JSON-RPC 2.0 message");
        const bool has_id = msg.contains("id");
        const json id = msg.value("id", json());
        if (!msg.contains("method") || !msg["method"].is_string()) {
            if (!has_id) return; // an answer to a request we never sent: nothing to do
            return send_error(id, invalid_request, "\"method\" must be a string");
        }
        if (has_id && !(id.is_string() || id.is_number_integer()))
            return send_error(nullptr, invalid_request, "\"id\" must be a string or an integer");
        const std::string method = msg["method"];
        const json params = msg.value("params", json::object());
        if (!has_id) return on_notification(method, params);
        if (!params.is_object())
            return send_error(id, invalid_params, "\"params\" must be an object");
        if (method == "initialize") return initialize(id, params);
        if (method == "ping") return send_result(id, json::object());
        if (method == "tools/list") return tools_list(id, params);
        if (method == "tools/call") return tools_call(id, params);
        send_error(id, method_not_found, "method not found: " + method);
    }

    void on_notification(const std::string& method, const json& params) {
        if (method != "notifications/cancelled" || !params.is_object()) return;
        auto it = by_mcp_id_.find(params.value("requestId", json()).dump());
        if (it == by_mcp_id_.end()) return; // finished already, or never ours: nothing to do
        auto p = pending_.find(it->second);
        if (p == pending_.end() || p->second.cancelled) return;
        p->second.cancelled = true;
        send_to_daemon({{"type", "cancel_tool_call"}, {"protocol", 1}, {"requestId", it->second}});
    }

    void initialize(const json& id, const json& params) {
        std::string_view chosen = revisions.front();
        const json* asked = get_field(params, "protocolVersion");
        if (asked != nullptr && !asked->is_string())
            return send_error(id, invalid_params, "\"protocolVersion\" must be a string");
        for (auto r : revisions)
            if (asked != nullptr && asked->get_ref<const std::string&>() == r) chosen = r;
        if (const json* info = get_field(params, "clientInfo"); info != nullptr) {
            const json* name = get_field(*info, "name");
            if (!info->is_object() || (name != nullptr && !name->is_string()))
                return send_error(id, invalid_params,
                                  "\"clientInfo\" must be an object with a string \"name\"");
            agent_ = get_string(*info, "name").value_or("");
        }
        if (!connect()) return send_error(id, internal_error, down_);
        send_result(id, {{"protocolVersion", chosen},
                         {"capabilities", {{"tools", {{"listChanged", true}}}}},
                         {"serverInfo", {{"name", "meith"}, {"version", MEITH_VERSION}}},
                         {"instructions", "Tools of the local meith registry (meithd), with its "
                                          "permissions and audit trail."}});
    }

    void tools_list(const json& id, const json& params) {
        std::size_t offset = 0;
        if (params.contains("cursor")) {
            const json& c = params["cursor"];
            std::size_t used = 0;
            try {
                if (!c.is_string()) throw std::invalid_argument("cursor");
                offset = std::stoul(c.get<std::string>(), &used);
                if (used != c.get<std::string>().size()) throw std::invalid_argument("cursor");
            } catch (const std::exception&) {
                return send_error(id, invalid_params, "invalid cursor");
            }
        }
        if (!connect()) return send_error(id, internal_error, down_);
        const std::string rid = ids_.next();
        pending p;
        p.mcp_id = id;
        p.offset = offset;
        pending_.emplace(rid, std::move(p));
        send_to_daemon({{"type", "list_tools"},
                        {"protocol", 1},
                        {"requestId", rid},
                        {"clientInfo", {{"caller", caller_}}}});
    }

    /// One page of MCP tools from the daemon's descriptors (docs/protocol.md §10).
    json tools_page(const json& descriptors, std::size_t offset) {
        std::vector<const json*> listed;
        for (const json& d : descriptors) {
            if (!d.is_object()) continue;
            if (get_string(d, "payloadKind") == "text")
                text_tools_.insert(get_string(d, "name").value_or(""));
            const std::string permission = get_string(d, "permission").value_or("");
            if (!opts_.all && permission != "allow" && permission != "ask") continue;
            listed.push_back(&d);
        }
        json tools = json::array();
        for (std::size_t i = offset; i < listed.size() && i < offset + page_size; ++i)
            tools.push_back(mcp_tool(*listed[i]));
        json result{{"tools", std::move(tools)}};
        if (offset + page_size < listed.size())
            result["nextCursor"] = std::to_string(offset + page_size);
        return result;
    }

    static json mcp_tool(const json& d) {
        json caps = d.value("capabilities", json::array());
        const auto has = [&](std::string_view c) {
            for (const auto& x : caps)
                if (x.is_string() && x.get<std::string>() == c) return true;
            return false;
        };
        json t{{"name", get_string(d, "name").value_or("")}};
        if (d.contains("title")) t["title"] = d["title"];
        t["description"] = get_string(d, "description").value_or("");
        json schema = d.value("inputSchema", json());
        if (get_string(d, "payloadKind") == "text")
            // MCP has no text-payload tools: one required string `input` (docs/protocol.md §13).
            schema = {{"type", "object"},
                      {"properties", {{"input", {{"type", "string"}}}}},
                      {"required", {"input"}}};
        t["inputSchema"] = schema.is_object() ? schema : json{{"type", "object"}};
        t["annotations"] = {{"readOnlyHint", caps.size() == 1 && has("read-only")},
                            {"destructiveHint", has("destructive")},
                            {"openWorldHint", has("accesses-network")}};
        if (d.contains("outputSchema")) t["outputSchema"] = d["outputSchema"];
        return t;
    }

    void tools_call(const json& id, const json& params) {
        if (!params.contains("name") || !params["name"].is_string())
            return send_error(id, invalid_params, "tools/call needs a string \"name\"");
        const json args = params.value("arguments", json::object());
        if (!args.is_object())
            return send_error(id, invalid_params, "\"arguments\" must be an object");
        if (by_mcp_id_.count(id.dump()))
            return send_error(id, invalid_request, "a request with this id is in flight");
        if (!connect()) return send_error(id, internal_error, down_);
        // The MCP request id is part of the requestId (docs/protocol.md §10), kept within 128 bytes
        // and cut on a UTF-8 character boundary (a split character would not come back as sent).
        // The generator's prefix keeps it unique however much of the MCP id is cut.
        std::string rid = ids_.next() + ":" + (id.is_string() ? id.get<std::string>() : id.dump());
        if (rid.size() > 128) {
            std::size_t cut = 128;
            while (cut > 0 && (static_cast<unsigned char>(rid[cut]) & 0xC0) == 0x80)
                --cut;
            rid.resize(cut);
        }
        pending p;
        p.mcp_id = id;
        p.is_call = true;
        if (params.contains("_meta") && params["_meta"].is_object())
            p.progress_token = params["_meta"].value("progressToken", json());
        pending_.emplace(rid, std::move(p));
        by_mcp_id_[id.dump()] = rid;
        json client{{"caller", caller_}};
        if (!agent_.empty()) client["agent"] = agent_;
        // A text-payload tool (listed with one string `input`) gets that string.
        const bool text = text_tools_.count(params["name"].get<std::string>()) > 0;
        send_to_daemon({{"type", "tool_call"},
                        {"protocol", 1},
                        {"requestId", rid},
                        {"toolName", params["name"]},
                        {"arguments", text ? json(get_string(args, "input").value_or("")) : args},
                        {"clientInfo", std::move(client)}});
    }

    /// A ToolResult as an MCP CallToolResult (docs/protocol.md §10).
    static void answer_call(const json& id, const json& r) {
        const json* ok = get_field(r, "ok");
        if (ok == nullptr || !ok->is_boolean() || !ok->get<bool>()) {
            const json err = r.value("error", json::object());
            const std::string code = get_string(err, "code").value_or("TOOL_FAILED");
            const std::string message = get_string(err, "message").value_or("");
            if (code == "UNKNOWN_TOOL") return send_error(id, invalid_params, message);
            return send_result(id,
                               {{"content", {{{"type", "text"}, {"text", code + ": " + message}}}},
                                {"isError", true}});
        }
        const json c = r.value("content", json());
        if (c.is_object() && c.contains("content") && c["content"].is_array()) {
            json out{{"content", c["content"]}}; // an MCP source's result passes through
            if (c.contains("structuredContent")) out["structuredContent"] = c["structuredContent"];
            return send_result(id, std::move(out));
        }
        if (c.is_string()) return send_result(id, {{"content", {{{"type", "text"}, {"text", c}}}}});
        json out{{"content", {{{"type", "text"}, {"text", compact(c)}}}}};
        if (c.is_object()) out["structuredContent"] = c;
        send_result(id, std::move(out));
    }

    const options& opts_;
    std::string caller_;
    std::string agent_; ///< the MCP client's clientInfo.name, sent as clientInfo.agent
    protocol::request_id_generator ids_;
    std::optional<protocol::client_channel> conn_;
    std::string down_; ///< why there is no daemon connection
    std::string in_;
    bool in_eof_ = false;
    std::map<std::string, pending> pending_;       ///< by daemon requestId
    std::map<std::string, std::string> by_mcp_id_; ///< MCP id (JSON text) → requestId
    std::set<std::string> text_tools_;             ///< text-payload tools seen in tools/list (§13)
};

} // namespace

int run_mcp(const options& opts) {
    return bridge(opts).run();
}

} // namespace meith::cli
