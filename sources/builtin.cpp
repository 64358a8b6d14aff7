#include "sources/factory.hpp"

#include "protocol/json_writer.hpp"

namespace meith::sources {

namespace {

/// Tools compiled into the daemon. `echo` resolves synchronously: no allocation beyond the
/// result itself, which makes it the transport benchmark's reference tool.
class builtin_source final : public tools::tool_source {
  public:
    std::string_view kind() const override { return "builtin"; }
    const std::string& name() const override { return name_; }
    tools::source_state state() const override { return state_; }

    void start(tools::source_events events) override {
        std::vector<tools::tool_definition> defs;
        tools::tool_definition echo;
        echo.name = "echo";
        echo.description = "Returns its arguments unchanged (health checks, benchmarks).";
        echo.input_schema_json = R"({"type":"object","additionalProperties":true})";
        echo.capabilities = {"read-only"};
        defs.push_back(std::move(echo));
        if (auto err = events.registered(*this, std::move(defs)))
            state_ = tools::source_state::failed;
        else
            state_ = tools::source_state::ready;
        events.settled(*this);
    }

    void execute(const tools::call_ptr& c, const tools::tool& t) override {
        if (t.remote_name == "echo") {
            c->resolve(protocol::tool_result::success(c->args_json));
            return;
        }
        c->resolve(protocol::tool_result::failure(protocol::error_code::unknown_tool,
                                                  "no built-in tool " + t.remote_name));
    }

    void stop(std::chrono::milliseconds, std::function<void()> done) override {
        state_ = tools::source_state::stopped;
        done();
    }

    std::string status_json() const override {
        std::string out = "{";
        protocol::json_members(out)
            .string("name", "builtin")
            .string("kind", "builtin")
            .string("state", to_string(state_))
            .null("pid")
            .number("restarts", 0)
            .null("lastError")
            .number("tools", 1);
        out += '}';
        return out;
    }

  private:
    std::string name_ = "builtin";
    tools::source_state state_ = tools::source_state::starting;
};

} // namespace

std::shared_ptr<tools::tool_source> make_builtin_source() {
    return std::make_shared<builtin_source>();
}

} // namespace meith::sources
