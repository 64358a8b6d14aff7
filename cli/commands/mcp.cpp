// mcp_bridge: `meith mcp` — the registry as an MCP server on stdio (docs/protocol.md §10, §17).
//
// Every MCP family is passed through: tools as list_tools/tool_call frames; resources, prompts,
// completions and logging as mcp_request frames; the servers' own requests (sampling,
// elicitation, roots) arrive as client_request frames and go to the client as JSON-RPC
// requests (2025-11-25) or as an `input_required` result answered on the retry (2026-07-28);
// notifications as mcp_notification frames. Both revisions are spoken, chosen per client: an
// `initialize` gives 2025-11-25 or older; `server/discover` or a request carrying the
// 2026-07-28 `_meta` envelope gives 2026-07-28 (subscriptions/listen for notifications).
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
#include "cli/commands/mcp_shapes.hpp"
#include "cli/commands/mcp_tasks.hpp"
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

namespace shapes = mcp_shapes;
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
    // ---- the daemon -----------------------------------------------------------------------

    /// The hello frame: subscribed to tools_changed and MCP notifications, declaring the
    /// client's capabilities so meithd forwards servers' requests it can answer (§17).
    json hello_frame(const std::string& id) const {
        json client{{"name", "meith mcp"}, {"caller", caller_}};
        if (!agent_.empty()) client["agent"] = agent_;
        return {{"type", "hello"},
                {"protocol", 1},
                {"requestId", id},
                {"clientInfo", std::move(client)},
                {"subscribe", {"tools_changed", "mcp_notifications"}},
                {"capabilities", client_caps_}};
    }

    /// Connects and says hello; false, with down_ set, if not.
    bool connect() {
        if (conn_) return true;
        try {
            daemon_connection dc = connect_daemon(opts_);
            protocol::client_channel ch = std::move(dc.channel);
            const std::string id = ids_.next();
            ch.send_frame(compact(hello_frame(id)));
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

    /// The client's capabilities changed (initialize, or a 2026-07-28 request's envelope): a
    /// new hello tells meithd (its reply is not waited for).
    void set_client(const json& caps, const json* info) {
        if (info != nullptr && info->is_object())
            if (auto name = get_string(*info, "name")) agent_ = *name;
        if (caps.is_object() && caps == client_caps_) return;
        client_caps_ = caps.is_object() ? caps : json::object();
        if (conn_) send_to_daemon(hello_frame(ids_.next()));
    }

    void daemon_gone(const std::string& why) {
        fmt::print(stderr, "meith mcp: {}\n", why);
        conn_.reset();
        down_ = why + (autostart_enabled(opts_) ? "; the next request starts it again"
                                                : "; start it again with: meithd");
        for (auto& [rid, p] : pending_)
            if (!p.cancelled && !p.mcp_id.is_null()) send_error(p.mcp_id, internal_error, down_);
        pending_.clear();
        by_mcp_id_.clear();
        to_daemon_request_.clear();
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

    enum class kind { list_tools, call, mcp };
    struct pending {
        json mcp_id; ///< null: nobody waits (a listen's subscribe; a 2026 call between rounds)
        kind k = kind::call;
        std::string method;         ///< mcp: the MCP method
        std::size_t offset = 0;     ///< tools/list and the other lists: the page's first item
        json progress_token;        ///< tools/call: null when the client asked for no progress
        std::uint64_t progress = 0; ///< events counted, for events that carry no progress
        bool cancelled = false;     ///< the client cancelled: its answer is not sent (MCP spec)
        bool modern = false;        ///< asked in 2026-07-28: results carry resultType, _meta
        // 2026-07-28 calls: servers' requests become an input_required result (§17)
        json inputs = json::object();             ///< key → {method, params}, not yet asked
        std::map<std::string, std::string> asked; ///< key → clientRequestId, asked
        std::optional<json> final;                ///< the answer, while no request waits
    };

    void on_daemon_frame(const std::string& line) {
        const json f = json::parse(line, nullptr, false);
        if (!f.is_object()) return;
        const std::string type = get_string(f, "type").value_or("");
        if (type == "tools_changed") return list_changed("notifications/tools/list_changed");
        if (type == "mcp_notification") return on_mcp_notification(f);
        if (type == "client_request") return on_client_request(f);
        const auto rid = get_string(f, "requestId");
        auto it = rid ? pending_.find(*rid) : pending_.end();
        if (it == pending_.end()) {
            if (type == "error")
                fmt::print(stderr, "meith mcp: meithd: {}\n",
                           get_string(f, "message").value_or(""));
            return;
        }
        pending& p = it->second;
        const auto task = tasks_.task_of(it->first);
        if (type == "tool_event") {
            const json event = f.value("event", json());
            if (task && get_string(event, "type") == "task_status")
                tasks_.working(*task, get_string(event, "message").value_or(""));
            if (!p.cancelled && !p.progress_token.is_null()) on_event(p, event);
            return;
        }
        json answer;
        bool failed = false;
        int code = internal_error;
        json error_data;
        std::string message;
        if (type == "tools_list") {
            answer = tools_page(f.value("tools", json::array()), p.offset);
        } else if (type == "tool_result") {
            bool unknown = false;
            answer = shapes::call_result(f.value("result", json::object()), unknown, message);
            if (unknown) failed = true, code = invalid_params;
        } else if (type == "mcp_result") {
            if (const json* e = get_field(f, "error"); e != nullptr && e->is_object()) {
                failed = true;
                code = e->value("code", internal_error);
                message = get_string(*e, "message").value_or("error");
                if (e->contains("data")) error_data = (*e)["data"];
            } else {
                answer = page_of(p.method, f.value("result", json::object()), p.offset);
            }
        } else if (type == "error") {
            failed = true;
            message = "meithd: " + get_string(f, "message").value_or("error");
        } else {
            return;
        }
        if (p.modern && !failed) shapes::mark_modern(answer, p.method);
        if (task) {
            // A task's call ended: its waiting tasks/result requests get the answer.
            json err{{"code", code}, {"message", message}};
            if (!error_data.is_null()) err["data"] = error_data;
            pending_.erase(it);
            for (const json& waiting : tasks_.finish(*task, failed ? err : answer, failed))
                send_task_result(waiting, *task);
            if (auto t = tasks_.get(*task)) notify("notifications/tasks/status", *t);
            return;
        }
        if (p.mcp_id.is_null()) {
            // A 2026-07-28 call between rounds keeps its answer for the retry.
            if (p.k == kind::call && !p.asked.empty() && !failed)
                p.final = std::move(answer);
            else
                pending_.erase(it);
            return;
        }
        const json mcp_id = p.mcp_id;
        const bool cancelled = p.cancelled;
        by_mcp_id_.erase(mcp_id.dump());
        pending_.erase(it);
        if (cancelled) return;
        if (!failed) return send_result(mcp_id, std::move(answer));
        json err{{"code", code}, {"message", message}};
        if (!error_data.is_null()) err["data"] = error_data;
        write_stdout(json{{"jsonrpc", "2.0"}, {"id", mcp_id}, {"error", std::move(err)}});
    }

    /// A list_changed for the client: as is (2025-11-25), or on each listen that asked for it.
    void list_changed(std::string_view method) {
        if (!modern_) return notify(method, json::object());
        const std::string_view flag =
            method == "notifications/tools/list_changed"     ? "toolsListChanged"
            : method == "notifications/prompts/list_changed" ? "promptsListChanged"
                                                             : "resourcesListChanged";
        for (const auto& [key, l] : listens_)
            if (l.notifications.value(std::string(flag), false))
                notify(method, {{"_meta", {{std::string(shapes::subscription_id_key), l.id}}}});
    }

    void on_mcp_notification(const json& f) {
        const std::string method = get_string(f, "method").value_or("");
        json params = f.value("params", json::object());
        if (method == "notifications/resources/list_changed" ||
            method == "notifications/prompts/list_changed")
            return list_changed(method);
        if (!modern_) return notify(method, std::move(params));
        if (method != "notifications/resources/updated") return; // 2026: no unsolicited messages
        const std::string uri = get_string(params, "uri").value_or("");
        for (const auto& [key, l] : listens_)
            if (l.uris.count(uri)) {
                json p = params;
                p["_meta"] = {{std::string(shapes::subscription_id_key), l.id}};
                notify(method, std::move(p));
            }
    }

    /// A server's request for the client (sampling, elicitation, roots), through meithd.
    void on_client_request(const json& f) {
        const std::string crid = get_string(f, "clientRequestId").value_or("");
        const std::string method = get_string(f, "method").value_or("");
        json params = f.value("params", json::object());
        auto it = pending_.find(get_string(f, "requestId").value_or(""));
        if (it == pending_.end() || it->second.cancelled) {
            send_to_daemon(
                {{"type", "client_response"},
                 {"protocol", 1},
                 {"clientRequestId", crid},
                 {"error", {{"code", internal_error}, {"message", "the call is over"}}}});
            return;
        }
        pending& p = it->second;
        if (!p.modern) {
            const std::string id = fmt::format("meith-{}", ++next_client_request_);
            to_daemon_request_[id] = crid;
            write_stdout(json{
                {"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
            return;
        }
        // 2026-07-28: the client takes no requests; the call answers input_required and the
        // client's retry carries the answers (multi-round-trip requests).
        p.inputs[crid] = {{"method", method}, {"params", std::move(params)}};
        if (!p.mcp_id.is_null()) ask_inputs(it->first, p);
    }

    /// Answers the waiting request of call `rid` with input_required for its queued inputs.
    void ask_inputs(const std::string& rid, pending& p) {
        json result{
            {"resultType", "input_required"}, {"inputRequests", p.inputs}, {"requestState", rid}};
        shapes::mark_modern(result, "tools/call");
        for (auto& [key, v] : p.inputs.items())
            p.asked[key] = key;
        p.inputs = json::object();
        by_mcp_id_.erase(p.mcp_id.dump());
        send_result(p.mcp_id, std::move(result));
        p.mcp_id = json();
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
            if (!has_id) return;
            if (msg.contains("result") || msg.contains("error")) return on_client_answer(msg);
            return send_error(id, invalid_request, "\"method\" must be a string");
        }
        if (has_id && !(id.is_string() || id.is_number_integer()))
            return send_error(nullptr, invalid_request, "\"id\" must be a string or an integer");
        const std::string method = msg["method"];
        json params = msg.value("params", json::object());
        if (!has_id) return on_notification(method, params);
        if (!params.is_object())
            return send_error(id, invalid_params, "\"params\" must be an object");
        const bool modern = read_envelope(id, params);
        if (modern && params.is_null()) return; // refused: answered
        if (method == "initialize") return initialize(id, params);
        if (method == "server/discover") return send_result(id, shapes::discover_result());
        if (method == "ping") return send_result(id, json::object());
        if (method == "tools/list") return tools_list(id, params, modern);
        if (method == "tools/call") return tools_call(id, params, modern);
        if (method == "subscriptions/listen") return listen(id, params);
        if (method.starts_with("tasks/") && !modern) return task_request(id, method, params);
        if (method == "resources/list" || method == "resources/templates/list" ||
            method == "resources/read" || method == "resources/subscribe" ||
            method == "resources/unsubscribe" || method == "prompts/list" ||
            method == "prompts/get" || method == "completion/complete" ||
            method == "logging/setLevel")
            return mcp_request(id, method, std::move(params), modern);
        send_error(id, method_not_found, "method not found: " + method);
    }

    /// A 2026-07-28 request carries its version and the client's capabilities in
    /// `_meta` (the envelope): read, taken out of `params`. True for such a request; an
    /// unsupported version is answered -32022 and `params` set to null.
    bool read_envelope(const json& id, json& params) {
        json* meta =
            params.contains("_meta") && params["_meta"].is_object() ? &params["_meta"] : nullptr;
        const std::string vkey(shapes::protocol_version_key);
        if (meta == nullptr || !meta->contains(vkey)) return false;
        const json version = (*meta)[vkey];
        if (!version.is_string() || version.get<std::string>() != shapes::modern_revision) {
            write_stdout(json{
                {"jsonrpc", "2.0"},
                {"id", id},
                {"error",
                 {{"code", -32022},
                  {"message", "Unsupported protocol version: " + compact(version)},
                  {"data", {{"supported", {shapes::modern_revision}}, {"requested", version}}}}}});
            params = json();
            return true;
        }
        modern_ = true;
        const json caps = meta->value(std::string(shapes::client_capabilities_key), json::object());
        const json* info = get_field(*meta, shapes::client_info_key);
        set_client(caps, info);
        for (auto key : {shapes::protocol_version_key, shapes::client_capabilities_key,
                         shapes::client_info_key})
            meta->erase(std::string(key));
        if (meta->empty()) params.erase("_meta");
        return true;
    }

    /// The client's answer to a server's request we sent it (2025-11-25).
    void on_client_answer(const json& msg) {
        const json& id = msg["id"];
        if (!id.is_string()) return;
        auto it = to_daemon_request_.find(id.get<std::string>());
        if (it == to_daemon_request_.end()) return;
        json frame{{"type", "client_response"}, {"protocol", 1}, {"clientRequestId", it->second}};
        if (msg.contains("result") && msg["result"].is_object())
            frame["result"] = msg["result"];
        else
            frame["error"] =
                msg.value("error", json{{"code", internal_error}, {"message", "no result object"}});
        to_daemon_request_.erase(it);
        if (conn_) send_to_daemon(frame);
    }

    void on_notification(const std::string& method, const json& params) {
        if (method != "notifications/cancelled" || !params.is_object()) return;
        const json request_id = params.value("requestId", json());
        if (auto l = listens_.find(request_id.dump()); l != listens_.end()) {
            for (const auto& uri : l->second.uris)
                subscribe_uri(uri, false);
            listens_.erase(l);
            return;
        }
        auto it = by_mcp_id_.find(request_id.dump());
        if (it == by_mcp_id_.end()) return; // finished already, or never ours: nothing to do
        auto p = pending_.find(it->second);
        if (p == pending_.end() || p->second.cancelled) return;
        p->second.cancelled = true;
        if (p->second.k == kind::call)
            send_to_daemon(
                {{"type", "cancel_tool_call"}, {"protocol", 1}, {"requestId", it->second}});
    }

    void initialize(const json& id, const json& params) {
        std::string_view chosen = shapes::legacy_revisions.front();
        const json* asked = get_field(params, "protocolVersion");
        if (asked != nullptr && !asked->is_string())
            return send_error(id, invalid_params, "\"protocolVersion\" must be a string");
        for (auto r : shapes::legacy_revisions)
            if (asked != nullptr && asked->get_ref<const std::string&>() == r) chosen = r;
        const json* info = get_field(params, "clientInfo");
        if (info != nullptr) {
            const json* name = get_field(*info, "name");
            if (!info->is_object() || (name != nullptr && !name->is_string()))
                return send_error(id, invalid_params,
                                  "\"clientInfo\" must be an object with a string \"name\"");
        }
        const json caps = params.value("capabilities", json::object());
        if (!caps.is_object())
            return send_error(id, invalid_params, "\"capabilities\" must be an object");
        modern_ = false;
        set_client(caps, info);
        if (!connect()) return send_error(id, internal_error, down_);
        send_result(id, {{"protocolVersion", chosen},
                         {"capabilities", shapes::server_capabilities()},
                         {"serverInfo", shapes::server_info()},
                         {"instructions", "Tools of the local meith registry (meithd), with its "
                                          "permissions and audit trail."}});
    }

    /// The offset a list request's `cursor` names (0 without one); nullopt when malformed.
    static std::optional<std::size_t> cursor_of(const json& params) {
        if (!params.contains("cursor")) return 0;
        const json& c = params["cursor"];
        try {
            if (!c.is_string()) return std::nullopt;
            std::size_t used = 0;
            const std::size_t offset = std::stoul(c.get<std::string>(), &used);
            if (used != c.get<std::string>().size()) return std::nullopt;
            return offset;
        } catch (const std::exception&) {
            return std::nullopt;
        }
    }

    /// Registers a request to meithd; `mcp_id` null when nobody waits for its answer.
    std::string track(const json& mcp_id, kind k, std::string method, bool modern,
                      std::size_t offset = 0) {
        const std::string rid = ids_.next();
        pending p;
        p.mcp_id = mcp_id;
        p.k = k;
        p.method = std::move(method);
        p.modern = modern;
        p.offset = offset;
        pending_.emplace(rid, std::move(p));
        if (!mcp_id.is_null()) by_mcp_id_[mcp_id.dump()] = rid;
        return rid;
    }

    void tools_list(const json& id, const json& params, bool modern) {
        const auto offset = cursor_of(params);
        if (!offset) return send_error(id, invalid_params, "invalid cursor");
        if (!connect()) return send_error(id, internal_error, down_);
        const std::string rid = track(id, kind::list_tools, "tools/list", modern, *offset);
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
            tools.push_back(shapes::tool_of(*listed[i]));
        json result{{"tools", std::move(tools)}};
        if (offset + page_size < listed.size())
            result["nextCursor"] = std::to_string(offset + page_size);
        return result;
    }

    /// meithd answers a list with every item: the client gets it page by page.
    static json page_of(const std::string& method, json result, std::size_t offset) {
        const char* key = method == "resources/list"             ? "resources"
                          : method == "resources/templates/list" ? "resourceTemplates"
                          : method == "prompts/list"             ? "prompts"
                                                                 : nullptr;
        if (key == nullptr || !result.contains(key) || !result[key].is_array()) return result;
        json& items = result[key];
        if (offset == 0 && items.size() <= page_size) return result;
        json page = json::array();
        for (std::size_t i = offset; i < items.size() && i < offset + page_size; ++i)
            page.push_back(std::move(items[i]));
        if (offset + page_size < items.size())
            result["nextCursor"] = std::to_string(offset + page_size);
        items = std::move(page);
        return result;
    }

    void mcp_request(const json& id, const std::string& method, json params, bool modern) {
        std::size_t offset = 0;
        if (method.ends_with("/list")) {
            const auto o = cursor_of(params);
            if (!o) return send_error(id, invalid_params, "invalid cursor");
            offset = *o;
            params.erase("cursor");
        }
        if (modern && (method == "resources/subscribe" || method == "resources/unsubscribe" ||
                       method == "logging/setLevel"))
            return send_error(id, method_not_found,
                              method + " is not in revision 2026-07-28 (subscriptions/listen "
                                       "replaces resource subscriptions)");
        if (!connect()) return send_error(id, internal_error, down_);
        const std::string rid = track(id, kind::mcp, method, modern, offset);
        send_to_daemon({{"type", "mcp_request"},
                        {"protocol", 1},
                        {"requestId", rid},
                        {"method", method},
                        {"params", std::move(params)},
                        {"clientInfo", {{"caller", caller_}}}});
    }

    void subscribe_uri(const std::string& uri, bool on) {
        if (!connect()) return;
        const std::string method = on ? "resources/subscribe" : "resources/unsubscribe";
        const std::string rid = track(json(), kind::mcp, method, true);
        send_to_daemon({{"type", "mcp_request"},
                        {"protocol", 1},
                        {"requestId", rid},
                        {"method", method},
                        {"params", {{"uri", uri}}},
                        {"clientInfo", {{"caller", caller_}}}});
    }

    /// subscriptions/listen (2026-07-28): acknowledged at once; its notifications carry its
    /// id in _meta until the client cancels it. Resource URIs are subscribed through meithd.
    void listen(const json& id, const json& params) {
        const json asked = params.value("notifications", json::object());
        if (!asked.is_object())
            return send_error(id, invalid_params, "\"notifications\" must be an object");
        if (!connect()) return send_error(id, internal_error, down_);
        listen_state l;
        l.id = id;
        json honored = json::object();
        for (const char* flag : {"toolsListChanged", "promptsListChanged", "resourcesListChanged"})
            if (asked.value(flag, false)) honored[flag] = true;
        if (asked.contains("resourceSubscriptions") && asked["resourceSubscriptions"].is_array()) {
            honored["resourceSubscriptions"] = json::array();
            for (const auto& u : asked["resourceSubscriptions"])
                if (u.is_string() && l.uris.insert(u.get<std::string>()).second) {
                    honored["resourceSubscriptions"].push_back(u);
                    subscribe_uri(u.get<std::string>(), true);
                }
        }
        l.notifications = honored;
        listens_[id.dump()] = std::move(l);
        notify("notifications/subscriptions/acknowledged",
               {{"notifications", honored},
                {"_meta", {{std::string(shapes::subscription_id_key), id}}}});
    }

    void tools_call(const json& id, const json& params, bool modern) {
        if (modern && params.contains("requestState")) return retry_call(id, params);
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
        p.k = kind::call;
        p.method = "tools/call";
        p.modern = modern;
        json frame{{"type", "tool_call"}, {"protocol", 1}, {"requestId", rid}};
        if (params.contains("_meta") && params["_meta"].is_object()) {
            const json& meta = params["_meta"];
            p.progress_token = meta.value("progressToken", json());
            // W3C trace context passes to the source and into the audit line (§17).
            if (meta.contains("traceparent") && meta["traceparent"].is_string())
                frame["traceparent"] = meta["traceparent"];
        }
        if (!modern && params.contains("task") && params["task"].is_object()) {
            // Task-augmented: answered now with the task; tasks/result gives the result.
            const json ttl = params["task"].value("ttl", json(300000));
            p.mcp_id = json();
            send_result(id, tasks_.create(rid, ttl.is_number_unsigned() ? ttl.get<std::uint64_t>()
                                                                        : 300000));
        } else {
            by_mcp_id_[id.dump()] = rid;
        }
        pending_.emplace(rid, std::move(p));
        json client{{"caller", caller_}};
        if (!agent_.empty()) client["agent"] = agent_;
        // A text-payload tool (listed with one string `input`) gets that string.
        const bool text = text_tools_.count(params["name"].get<std::string>()) > 0;
        frame["toolName"] = params["name"];
        frame["arguments"] = text ? json(get_string(args, "input").value_or("")) : args;
        frame["clientInfo"] = std::move(client);
        send_to_daemon(frame);
    }

    /// tasks/get, tasks/result, tasks/cancel, tasks/list (2025-11-25 basic/utilities/tasks).
    void task_request(const json& id, const std::string& method, const json& params) {
        if (method == "tasks/list") return send_result(id, tasks_.list());
        const std::string task_id = get_string(params, "taskId").value_or("");
        if (method == "tasks/result") {
            bool unknown = false;
            if (auto done = tasks_.result_or_wait(task_id, id, unknown)) {
                json reply{{"jsonrpc", "2.0"}, {"id", id}};
                reply.update(*done);
                return write_stdout(reply);
            }
            if (unknown) return send_error(id, invalid_params, "no task " + task_id);
            return; // answered when the task ends
        }
        if (method == "tasks/cancel") {
            if (auto rid = tasks_.cancel(task_id); rid && conn_)
                send_to_daemon(
                    {{"type", "cancel_tool_call"}, {"protocol", 1}, {"requestId", *rid}});
        } else if (method != "tasks/get") {
            return send_error(id, method_not_found, "method not found: " + method);
        }
        if (auto t = tasks_.get(task_id)) return send_result(id, *t);
        send_error(id, invalid_params, "no task " + task_id);
    }

    void send_task_result(const json& id, const std::string& task_id) {
        json reply{{"jsonrpc", "2.0"}, {"id", id}};
        reply.update(tasks_.result_of(task_id));
        write_stdout(reply);
    }

    /// A 2026-07-28 retry of a call that answered input_required: the answers go to meithd,
    /// and this request waits for the call's next round or its result.
    void retry_call(const json& id, const json& params) {
        const json state = params["requestState"];
        auto it = state.is_string() ? pending_.find(state.get<std::string>()) : pending_.end();
        if (it == pending_.end() || !it->second.mcp_id.is_null())
            return send_error(id, invalid_params, "Invalid or expired requestState");
        pending& p = it->second;
        const json responses = params.value("inputResponses", json::object());
        if (responses.is_object())
            for (auto& [key, answer] : responses.items()) {
                auto a = p.asked.find(key);
                if (a == p.asked.end()) continue;
                json frame{
                    {"type", "client_response"}, {"protocol", 1}, {"clientRequestId", a->second}};
                frame[answer.is_object() ? "result" : "error"] =
                    answer.is_object() ? answer
                                       : json{{"code", invalid_params}, {"message", "no answer"}};
                p.asked.erase(a);
                if (conn_) send_to_daemon(frame);
            }
        p.mcp_id = id;
        by_mcp_id_[id.dump()] = it->first;
        if (p.final) {
            json answer = std::move(*p.final);
            by_mcp_id_.erase(id.dump());
            pending_.erase(it);
            return send_result(id, std::move(answer));
        }
        if (!p.inputs.empty()) ask_inputs(it->first, p);
    }

    struct listen_state {
        json id;
        json notifications = json::object();
        std::set<std::string> uris;
    };

    const options& opts_;
    std::string caller_;
    std::string agent_; ///< the MCP client's clientInfo.name, sent as clientInfo.agent
    json client_caps_ = json::object(); ///< its ClientCapabilities, sent in hello (§17)
    bool modern_ = false;               ///< the client speaks 2026-07-28
    protocol::request_id_generator ids_;
    std::optional<protocol::client_channel> conn_;
    std::string down_; ///< why there is no daemon connection
    std::string in_;
    bool in_eof_ = false;
    std::map<std::string, pending> pending_;       ///< by daemon requestId
    std::map<std::string, std::string> by_mcp_id_; ///< MCP id (JSON text) → requestId
    std::set<std::string> text_tools_;             ///< text-payload tools seen in tools/list (§13)
    /// Servers' requests sent to the client (2025-11-25): our JSON-RPC id → clientRequestId.
    std::map<std::string, std::string> to_daemon_request_;
    std::uint64_t next_client_request_ = 0;
    std::map<std::string, listen_state> listens_; ///< subscriptions/listen by id (JSON text)
    task_table tasks_;                            ///< task-augmented calls (mcp_tasks.hpp)
};

} // namespace

int run_mcp(const options& opts) {
    return bridge(opts).run();
}

} // namespace meith::cli
