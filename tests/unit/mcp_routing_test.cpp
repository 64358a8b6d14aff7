// Unit tests: how the gateway matches a URI to a resource template (gateway/mcp_gateway.hpp,
// docs/protocol.md §17) and the bridge's task table (bridge/tasks.hpp).
#include "bridge/tasks.hpp"
#include "gateway/mcp_gateway.hpp"
#include "registry/registry.hpp"

#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

using meith::gateway::uri_template_matches;

namespace unit_mcp_routing_test { // one namespace per file: the tests build as unity batches

namespace {

using nlohmann::json;
using namespace meith::registry;
using namespace meith::tools;
using meith::gateway::mcp_gateway;

/// An MCP source offering resources: `resources` listed exactly, `templates` as uriTemplates;
/// resources/read answers "read from NAME".
class resource_source : public tool_source, public mcp_peer {
  public:
    resource_source(std::string name, std::vector<std::string> resources,
                    std::vector<std::string> templates)
        : name_(std::move(name)), resources_(std::move(resources)),
          templates_(std::move(templates)) {}
    const std::string& name() const override { return name_; }
    std::string_view kind() const override { return "mcp"; }
    source_state state() const override { return state_; }
    void start(source_events events) override {
        events.registered(*this, {});
        state_ = source_state::ready;
        events.settled(*this);
    }
    void execute(const call_ptr&, const tool&) override {}
    void stop(std::chrono::milliseconds, std::function<void()> done) override {
        state_ = source_state::stopped;
        done();
    }
    std::string status_json() const override { return "{}"; }
    mcp_peer* mcp() override { return this; }

    bool offers(std::string_view capability) const override { return capability == "resources"; }
    void forward(std::string_view method, std::string params_json,
                 std::function<void(mcp_answer)> done) override {
        json result;
        if (method == "resources/list") {
            result["resources"] = json::array();
            for (const auto& u : resources_)
                result["resources"].push_back({{"uri", u}, {"name", u}});
        } else if (method == "resources/templates/list") {
            result["resourceTemplates"] = json::array();
            for (const auto& t : templates_)
                result["resourceTemplates"].push_back({{"uriTemplate", t}, {"name", t}});
        } else if (method == "resources/read") {
            const auto uri = json::parse(params_json)["uri"];
            result["contents"] = json::array({{{"uri", uri}, {"text", "read from " + name_}}});
        } else {
            return done(mcp_error(-32601, "no"));
        }
        done({true, result.dump()});
    }
    meith::permissions::capability_set resource_capabilities() const override {
        return meith::permissions::bit(meith::permissions::capability::read_only);
    }

  private:
    std::string name_;
    std::vector<std::string> resources_, templates_;
    source_state state_ = source_state::starting;
};

/// Which source resources/read of `uri` reached, after the client asked `first` (each a list
/// method, in order).
std::string read_from(const std::vector<std::string>& first, const std::string& uri) {
    asio::io_context ioc;
    meith::config::config cfg;
    registry reg(ioc.get_executor(), cfg, nullptr);
    meith::gateway::mcp_gateway gw{reg};
    // "early" serves notes://{id} by a template; "late", later in the config, lists one of
    // its URIs exactly.
    reg.add_source(std::make_shared<resource_source>("early",
                                                     std::vector<std::string>{"notes://index"},
                                                     std::vector<std::string>{"notes://{id}"}));
    reg.add_source(std::make_shared<resource_source>(
        "late", std::vector<std::string>{"notes://secret", "late://own"},
        std::vector<std::string>{}));
    bool ready = false;
    reg.start([&] { ready = true; });
    REQUIRE(ready);
    mcp_gateway::requester who;
    who.who = meith::permissions::caller::cli;
    for (const auto& m : first) {
        bool listed = false;
        gw.request(who, m, "{}", [&](mcp_answer a) { listed = a.ok; });
        ioc.poll();
        REQUIRE(listed);
    }
    std::optional<mcp_answer> read;
    gw.request(who, "resources/read", json{{"uri", uri}}.dump(),
               [&](mcp_answer a) { read = std::move(a); });
    ioc.poll();
    REQUIRE(read);
    INFO(read->json);
    REQUIRE(read->ok);
    return json::parse(read->json)["contents"][0]["text"];
}

} // namespace

TEST_CASE("mcp routing: RFC 6570 expressions stand for the URI's parts between literals", "[mcp]") {
    CHECK(uri_template_matches("demo://resource/dynamic/text/{id}",
                               "demo://resource/dynamic/text/12"));
    CHECK_FALSE(
        uri_template_matches("demo://resource/dynamic/text/{id}", "demo://resource/dynamic/text/"));
    CHECK_FALSE(uri_template_matches("demo://resource/dynamic/text/{id}",
                                     "demo://resource/dynamic/blob/1"));
    CHECK(uri_template_matches("file:///{path}.md", "file:///a/b.md"));
    CHECK_FALSE(uri_template_matches("file:///{path}.md", "file:///a/b.txt"));
    CHECK(uri_template_matches("repo://{owner}/{name}/issues", "repo://me/meith/issues"));
    CHECK_FALSE(uri_template_matches("repo://{owner}/{name}/issues", "repo://me/meith/pulls"));
    CHECK(uri_template_matches("search://q{?term}", "search://q")); // may be empty
    CHECK(uri_template_matches("static://a", "static://a"));
    CHECK_FALSE(uri_template_matches("static://a", "static://ab"));
}

TEST_CASE("mcp tasks: created working, ended with the answer, waiting results answered", "[mcp]") {
    meith::bridge::task_table t;
    const auto created = t.create("rid-1", 1000);
    const std::string id = created["task"]["taskId"];
    CHECK(created["task"]["status"] == "working");
    CHECK(t.task_of("rid-1") == id);
    bool unknown = true;
    CHECK_FALSE(t.result_or_wait(id, 7, unknown));
    CHECK_FALSE(unknown);
    t.working(id, "halfway");
    CHECK((*t.get(id))["statusMessage"] == "halfway");
    const auto waiting = t.finish(id, {{"content", meith::bridge::json::array()}}, false);
    REQUIRE(waiting.size() == 1);
    CHECK(waiting[0] == 7);
    CHECK((*t.get(id))["status"] == "completed");
    const auto answer = t.result_of(id);
    CHECK(answer["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == id);
    CHECK_FALSE(t.task_of("rid-1"));
    CHECK(t.list()["tasks"].size() == 1);
}

TEST_CASE("mcp tasks: a finished task is forgotten after its ttl, and the ttl a client asks "
          "for is bounded",
          "[mcp]") {
    meith::bridge::task_table t;
    const std::string short_lived = t.create("rid-a", 0)["task"]["taskId"];
    const auto kept = t.create("rid-b", 1ull << 62);
    CHECK(kept["task"]["ttl"] == meith::bridge::task_table::max_ttl_ms);
    const std::string kept_id = kept["task"]["taskId"];
    t.finish(short_lived, {{"content", meith::bridge::json::array()}}, false);
    t.finish(kept_id, {{"content", meith::bridge::json::array()}}, false);
    // The next create (or list) forgets what is past its ttl: the 0 ms one, not the other.
    t.create("rid-c", 1000);
    CHECK_FALSE(t.get(short_lived));
    CHECK(t.get(kept_id));
    CHECK(t.list()["tasks"].size() == 2);
}

TEST_CASE("mcp tasks: a cancelled task stays cancelled when its call ends", "[mcp]") {
    meith::bridge::task_table t;
    const std::string id = t.create("rid-2", 1000)["task"]["taskId"];
    CHECK(t.cancel(id) == "rid-2");
    CHECK_FALSE(t.cancel(id)); // once
    t.finish(id, {{"code", -32603}, {"message", "CANCELLED"}}, true);
    CHECK((*t.get(id))["status"] == "cancelled");
    CHECK(t.result_of(id)["error"]["message"] == "the task was cancelled");
    bool unknown = false;
    CHECK_FALSE(t.result_or_wait("nope", 1, unknown));
    CHECK(unknown);
}

TEST_CASE("mcp routing: a URI an earlier source serves by a template stays with it, whatever a "
          "later source lists",
          "[mcp]") {
    // Whatever the client listed before reading, and in whichever order.
    CHECK(read_from({"resources/list"}, "notes://secret") == "read from early");
    CHECK(read_from({"resources/templates/list", "resources/list"}, "notes://secret") ==
          "read from early");
    CHECK(read_from({"resources/list", "resources/templates/list"}, "notes://secret") ==
          "read from early");
    CHECK(read_from({}, "notes://secret") == "read from early");
    // What only the later source serves stays its own.
    CHECK(read_from({"resources/list"}, "late://own") == "read from late");
    CHECK(read_from({}, "late://own") == "read from late");
}

} // namespace unit_mcp_routing_test
