#include "process/rpc_peer.hpp"

#include "protocol/json_writer.hpp"

#include <charconv>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::process {

namespace {

std::string cut_for_log(std::string_view s) {
    if (s.size() <= 200) return std::string(s);
    return fmt::format("{}… ({} bytes)", s.substr(0, 200), s.size());
}

} // namespace

rpc_peer::rpc_peer(asio::any_io_executor ex, child_reaper& reaper, process_spec spec,
                   supervised_process::policy pol, rpc_dialect dialect, std::string label,
                   handlers h)
    : dialect_(dialect), label_(std::move(label)), h_(std::move(h)),
      proc_(std::move(ex), reaper, std::move(spec), pol, [this] {
          supervised_process::handlers sh;
          sh.on_spawn = [this] {
              if (h_.on_spawn) h_.on_spawn();
          };
          sh.on_line = [this](std::string_view line) { on_line(line); };
          sh.on_oversized = [this](const protocol::top_level_scanner::value& id, std::size_t) {
              on_oversized(id);
          };
          sh.on_exit = [this](const std::string& how) { on_exit(how); };
          sh.on_lifecycle = [this](std::string_view event, const std::string& details) {
              if (h_.on_lifecycle) h_.on_lifecycle(event, details);
          };
          return sh;
      }()) {
}

std::optional<std::uint64_t> rpc_peer::request(std::string_view method,
                                               std::string_view params_json, callbacks cb) {
    const std::uint64_t id = ++next_id_;
    frame_.clear();
    if (dialect_ == rpc_dialect::jsonrpc) {
        frame_.append(R"({"jsonrpc":"2.0","id":)");
        protocol::append_uint(frame_, id);
    } else {
        frame_.append(R"({"v":1,"id":")");
        protocol::append_uint(frame_, id);
        frame_.push_back('"');
    }
    frame_.append(R"(,"method":)");
    protocol::append_json_string(frame_, method);
    frame_.append(R"(,"params":)");
    frame_.append(params_json);
    frame_.append("}\n");
    if (!proc_.send(frame_)) return std::nullopt;
    pending_.emplace(id, std::make_shared<callbacks>(std::move(cb)));
    return id;
}

void rpc_peer::abandon(std::uint64_t id) {
    pending_.erase(id);
}

bool rpc_peer::notify(std::string_view method, std::string_view params_json) {
    std::string line = R"({"jsonrpc":"2.0","method":)";
    protocol::append_json_string(line, method);
    line.append(R"(,"params":)");
    line.append(params_json);
    line.append("}\n");
    return proc_.send(line);
}

bool rpc_peer::reply(std::string_view id_json, std::string_view result_json) {
    std::string line = R"({"jsonrpc":"2.0","id":)";
    line.append(id_json);
    line.append(R"(,"result":)");
    line.append(result_json);
    line.append("}\n");
    return proc_.send(line);
}

bool rpc_peer::reply_error(std::string_view id_json, int code, std::string_view message) {
    std::string error = R"({"code":)";
    error.append(std::to_string(code));
    error.append(R"(,"message":)");
    protocol::append_json_string(error, message);
    error.push_back('}');
    return reply_error_object(id_json, error);
}

bool rpc_peer::reply_error_object(std::string_view id_json, std::string_view error_json) {
    std::string line = R"({"jsonrpc":"2.0","id":)";
    line.append(id_json);
    line.append(R"(,"error":)");
    line.append(error_json);
    line.append("}\n");
    return proc_.send(line);
}

namespace rpc_wire {

std::optional<std::uint64_t> id_of(rpc_dialect dialect, simdjson::dom::object msg) {
    std::uint64_t id = 0;
    if (dialect == rpc_dialect::jsonrpc) {
        if (msg["id"].get_uint64().get(id) == simdjson::SUCCESS) return id;
        return std::nullopt;
    }
    std::string_view text;
    if (msg["id"].get_string().get(text) != simdjson::SUCCESS) return std::nullopt;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (ec != std::errc{} || ptr != text.data() + text.size()) return std::nullopt;
    return id;
}

std::optional<std::uint64_t> id_of_scanned(rpc_dialect dialect,
                                           const protocol::top_level_scanner::value& id) {
    using kind = protocol::top_level_scanner::value::kind;
    if (id.k != (dialect == rpc_dialect::tool_host ? kind::string : kind::number))
        return std::nullopt;
    std::uint64_t n = 0;
    const char* last = id.text.data() + id.text.size();
    auto [ptr, ec] = std::from_chars(id.text.data(), last, n);
    if (ec != std::errc{} || ptr != last || id.text.empty()) return std::nullopt;
    return n;
}

protocol::tool_result error_result(simdjson::dom::element error, std::string_view fallback) {
    constexpr std::size_t max_message = 1024;
    std::string_view message;
    if (error["message"].get_string().get(message) != simdjson::SUCCESS || message.empty())
        message = fallback;
    std::string details = R"({"code":)";
    simdjson::dom::element v;
    details += error["code"].get(v) == simdjson::SUCCESS ? simdjson::minify(v) : "null";
    details += R"(,"message":)";
    details += error["message"].get(v) == simdjson::SUCCESS ? simdjson::minify(v) : "null";
    if (error["data"].get(v) == simdjson::SUCCESS) details += R"(,"data":)" + simdjson::minify(v);
    details += '}';
    return protocol::tool_result::failure(protocol::error_code::tool_failed,
                                          std::string(protocol::cut_utf8(message, max_message)),
                                          std::move(details));
}

parsed_line classify_line(simdjson::dom::parser& parser, rpc_dialect dialect,
                          std::string_view line) {
    parsed_line out;
    simdjson::dom::element root;
    if (parser.parse(line.data(), line.size(), false).get(root) != simdjson::SUCCESS ||
        root.get_object().get(out.msg) != simdjson::SUCCESS)
        return out; // garbage
    if (dialect == rpc_dialect::jsonrpc && out.msg["method"].error() == simdjson::SUCCESS) {
        out.kind = line_kind::incoming;
        return out;
    }
    const auto id = id_of(dialect, out.msg);
    if (!id) {
        out.kind = line_kind::no_id;
        return out;
    }
    out.id = *id;
    out.kind = line_kind::reply;
    if (dialect == rpc_dialect::tool_host) {
        bool ok = false;
        if (out.msg["event"].error() == simdjson::SUCCESS)
            out.kind = line_kind::event;
        else if (out.msg["ok"].get_bool().get(ok) != simdjson::SUCCESS)
            out.kind = line_kind::malformed;
    }
    return out;
}

} // namespace rpc_wire

void rpc_peer::on_line(std::string_view line) {
    // Lines from the framer are padded: parsed in place, not copied.
    const auto p = rpc_wire::classify_line(parser_, dialect_, line);
    switch (p.kind) {
    case rpc_wire::line_kind::garbage:
        if (garbage_log_.allow())
            spdlog::warn("{} wrote a line that is not a protocol message (skipped): {}{}", label_,
                         cut_for_log(line), garbage_log_.suppressed());
        return;
    case rpc_wire::line_kind::incoming:
        // The child's own request or notification.
        if (h_.on_incoming)
            h_.on_incoming(p.msg);
        else
            spdlog::debug("{}: ignored a message from the child: {}", label_, cut_for_log(line));
        return;
    case rpc_wire::line_kind::no_id:
        if (garbage_log_.allow())
            spdlog::warn("{} wrote a message without a known id (skipped): {}{}", label_,
                         cut_for_log(line), garbage_log_.suppressed());
        return;
    case rpc_wire::line_kind::event:
    case rpc_wire::line_kind::reply:
    case rpc_wire::line_kind::malformed:
        break;
    }
    auto it = pending_.find(p.id);
    if (it == pending_.end()) {
        spdlog::debug("{}: dropped a reply for id {} (no longer in flight)", label_, p.id);
        return;
    }
    if (p.kind == rpc_wire::line_kind::malformed) {
        spdlog::warn("{}: message for id {} has neither event nor ok (skipped)", label_, p.id);
        return;
    }
    if (p.kind == rpc_wire::line_kind::event) {
        // Held while it runs: the callback may abandon its own request.
        const auto cb = it->second;
        if (cb->on_message) cb->on_message(p.msg, false);
        return;
    }
    const auto cb = std::move(it->second);
    pending_.erase(it);
    if (cb->on_message) cb->on_message(p.msg, true);
}

void rpc_peer::on_oversized(const protocol::top_level_scanner::value& scanned) {
    const auto id = rpc_wire::id_of_scanned(dialect_, scanned);
    if (!id) return;
    auto it = pending_.find(*id);
    if (it == pending_.end()) return;
    const auto cb = std::move(it->second);
    pending_.erase(it);
    if (cb->on_failure) cb->on_failure(rpc_failure::oversized, {});
}

void rpc_peer::on_exit(const std::string& how) {
    // Everything in flight fails at once: the child is gone, no reply will come.
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [id, cb] : pending)
        if (cb->on_failure) cb->on_failure(rpc_failure::exited, how);
    if (h_.on_exit) h_.on_exit(how);
}

} // namespace meith::process
