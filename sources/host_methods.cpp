#include "sources/host_methods.hpp"

#include "protocol/json_writer.hpp"
#include "tools/tool_source.hpp"

#include <asio/steady_timer.hpp>
#include <simdjson.h>

namespace meith::sources {

namespace {

/// The tool-host protocol's optional methods (docs/protocol.md §13), probed once per start.
constexpr std::array<std::string_view, 7> optional_methods = {
    "format_tool_call_preview", "format_tool_result", "to_display_format", "get_config_schema",
    "get_ui_elements",          "get_tags",           "required_tags"};

std::optional<std::size_t> optional_index(std::string_view method) {
    for (std::size_t i = 0; i < optional_methods.size(); ++i)
        if (optional_methods[i] == method) return i;
    return std::nullopt;
}

} // namespace

std::vector<std::string> string_array(std::string_view json) {
    std::vector<std::string> out;
    simdjson::dom::parser parser;
    simdjson::dom::array list;
    if (parser.parse(json).get_array().get(list) != simdjson::SUCCESS) return out;
    for (auto item : list) {
        std::string_view s;
        if (item.get_string().get(s) == simdjson::SUCCESS) out.emplace_back(s);
    }
    return out;
}

host_methods::host_methods(asio::any_io_executor ex, process::rpc_peer& peer,
                           std::string& state_json)
    : ex_(std::move(ex)), peer_(peer), state_json_(state_json) {
}

void host_methods::reset() {
    ++generation_;
    methods_ = {};
    tags_.clear();
    required_tags_.clear();
    probed_ = false;
    probes_pending_ = 0;
}

void host_methods::append_status(std::string& out) const {
    protocol::json_members m(out);
    if (probes_pending_ > 0 || !probed_) {
        m.null("methods");
        return;
    }
    m.key("methods").push_back('[');
    bool first = true;
    for (std::size_t i = 0; i < optional_methods.size(); ++i) {
        if (methods_[i] != presence::present) continue;
        if (!first) out += ',';
        first = false;
        protocol::append_json_string(out, optional_methods[i]);
    }
    out += ']';
}

void host_methods::call(std::string_view method, std::string params_members,
                        std::function<void(std::optional<std::string>)> done) {
    const auto i = optional_index(method);
    if (!i || methods_[*i] == presence::absent) {
        done(std::nullopt); // known absent: no round trip
        return;
    }
    std::string params = "{" + params_members;
    protocol::json_members(params).raw("state", state_json_);
    params += '}';
    ask(*i, params, std::move(done));
}

void host_methods::ask(std::size_t i, std::string_view params,
                       std::function<void(std::optional<std::string>)> done) {
    struct pending {
        std::function<void(std::optional<std::string>)> done;
        std::optional<std::uint64_t> id;
        asio::steady_timer timer;
        bool finished = false;
        void finish(std::optional<std::string> v) {
            if (finished) return;
            finished = true;
            timer.cancel();
            auto fn = std::move(done);
            fn(std::move(v));
        }
    };
    auto p = std::make_shared<pending>(
        pending{std::move(done), std::nullopt, asio::steady_timer(ex_), false});
    process::rpc_peer::callbacks cb;
    const std::uint64_t generation = generation_;
    // The state an optional method hands back is ignored: it was given a snapshot, and an
    // execute_tool answered meanwhile may have moved the state on (a late answer would roll
    // it back). Formatting a preview or a result does not change a host's state.
    cb.on_message = [this, i, p, generation](simdjson::dom::object msg, bool final) {
        if (!final) return; // an optional method streams nothing
        bool ok = false;
        if (msg["ok"].get_bool().get(ok) != simdjson::SUCCESS) ok = false;
        simdjson::dom::element result, value;
        if (ok && msg["result"].get(result) == simdjson::SUCCESS) {
            if (generation == generation_) methods_[i] = presence::present;
            if (result["value"].get(value) == simdjson::SUCCESS) {
                p->finish(simdjson::minify(value));
                return;
            }
            p->finish(std::string("null"));
            return;
        }
        std::string_view type;
        if (msg["error"]["type"].get_string().get(type) == simdjson::SUCCESS &&
            type == "MethodNotFound") {
            if (generation == generation_) methods_[i] = presence::absent;
        } else if (generation == generation_ && methods_[i] == presence::unknown) {
            methods_[i] = presence::present; // it exists; it refused these params
        }
        p->finish(std::nullopt);
    };
    cb.on_failure = [p](process::rpc_failure, const std::string&) { p->finish(std::nullopt); };
    p->id = peer_.request(optional_methods[i], params, std::move(cb));
    if (!p->id) {
        p->finish(std::nullopt);
        return;
    }
    p->timer.expires_after(tools::optional_method_timeout);
    p->timer.async_wait([this, alive = alive_, p](const std::error_code& ec) {
        if (ec || p->finished || alive.expired()) return;
        peer_.abandon(*p->id);
        p->finish(std::nullopt);
    });
}

void host_methods::probe(const std::string& config_json, std::function<void()> tags_learned) {
    methods_ = {};
    probed_ = true;
    const std::string s = state_json_;
    const std::string result = R"({"success":true,"result":null})";
    // `{members,"state":s}`, the members written by `fill`.
    const auto with_state = [&s](auto fill) {
        std::string o = "{";
        protocol::json_members m(o);
        fill(m);
        m.raw("state", s);
        o += '}';
        return o;
    };
    const std::array<std::string, 7> params = {
        with_state([](auto& m) { m.string("tool_name", "").raw("arguments", "{}"); }),
        with_state([&](auto& m) { m.raw("result", result); }),
        with_state([&](auto& m) { m.string("text", "").raw("result", result); }),
        "{}",
        "{}",
        with_state([&](auto& m) { m.raw("config", config_json).raw("models", "[]"); }),
        "{}"};
    probes_pending_ = optional_methods.size();
    for (std::size_t i = 0; i < optional_methods.size(); ++i)
        ask(i, params[i],
            [this, i, generation = generation_, tags_learned](std::optional<std::string> v) {
                if (generation != generation_ || probes_pending_ == 0) return;
                // The answers that hold for the host's whole run (docs/protocol.md §13).
                if (v && optional_methods[i] == "get_tags") tags_ = string_array(*v);
                if (v && optional_methods[i] == "required_tags") required_tags_ = string_array(*v);
                if (--probes_pending_ == 0 && (!tags_.empty() || !required_tags_.empty()) &&
                    tags_learned)
                    tags_learned();
            });
}

} // namespace meith::sources
