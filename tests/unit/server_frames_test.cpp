// Unit tests for protocol/server_frames: the frames meithd sends to approvers and the kinds of
// tool_event, byte for byte (key order included: clients and the audit compare them), as the
// registry, approvals, sources and connections built them by hand before (issue 42).
#include "protocol/server_frames.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace meith::protocol;

namespace unit_server_frames_test { // one namespace per file: the tests build as unity batches

TEST_CASE("server frames: approval_request for a held call, with and without agent and client",
          "[encode]") {
    approval_request_frame f;
    f.approval_id = "a_1";
    f.request_id = "r\"1";
    f.session_id = "s_1";
    f.caller = "cli";
    f.tool_name = "fs_write";
    f.capabilities_json = R"(["writes-files"])";
    f.reason = "rule ask";
    f.args_json = R"({"path":"/tmp/x"})";
    f.preview = "fs_write(/tmp/x)";
    f.timeout_ms = 30000;
    std::string out;
    append_approval_request(out, f);
    CHECK(out == R"({"type":"approval_request","protocol":1,"approvalId":"a_1","requestId":"r\"1",)"
                 R"("sessionId":"s_1","caller":"cli","agent":null,"toolName":"fs_write",)"
                 R"("capabilities":["writes-files"],"reason":"rule ask","args":{"path":"/tmp/x"},)"
                 R"j("preview":"fs_write(/tmp/x)","timeoutMs":30000})j"
                 "\n");
    f.agent = "claude-code";
    f.client = "work";
    out.clear();
    append_approval_request(out, f);
    CHECK(out.find(R"("caller":"cli","agent":"claude-code","client":"work","toolName":)") !=
          std::string::npos);
}

TEST_CASE("server frames: approval_request for an egress target, with and without its call",
          "[encode]") {
    egress_request_frame f;
    f.approval_id = "a_2";
    f.source = "web";
    f.host = "::1";
    f.port = 443;
    f.target = "[::1]:443";
    f.via = "connect";
    f.reason = "why";
    f.timeout_ms = 5000;
    std::string out;
    append_egress_request(out, f);
    CHECK(out ==
          R"({"type":"approval_request","protocol":1,"approvalId":"a_2","kind":"egress",)"
          R"("source":"web","host":"::1","port":443,"target":"[::1]:443","via":"connect",)"
          R"("requestId":null,"sessionId":null,"caller":null,"toolName":null,"reason":"why",)"
          R"("decisions":["allow_once","allow_session","allow_always","deny"],)"
          R"("timeoutMs":5000})"
          "\n");
    f.request_id = "r1";
    f.session_id = "s1";
    f.caller = "plugin";
    f.tool_name = "fetch";
    out.clear();
    append_egress_request(out, f);
    CHECK(out.find(R"("requestId":"r1","sessionId":"s1","caller":"plugin","toolName":"fetch",)") !=
          std::string::npos);
}

TEST_CASE("server frames: approval_resolved and tool_quarantined", "[encode]") {
    std::string out;
    append_approval_resolved(out, "a_1", "withdrawn", "the call ended");
    CHECK(out == R"({"type":"approval_resolved","protocol":1,"approvalId":"a_1",)"
                 R"("decision":"withdrawn","reason":"the call ended"})"
                 "\n");
    out.clear();
    append_tool_quarantined(out, "web_fetch", "web", true);
    CHECK(out == R"({"type":"tool_quarantined","protocol":1,"toolName":"web_fetch",)"
                 R"("source":"web","new":true})"
                 "\n");
}

TEST_CASE("tool events: approval_pending, events_dropped and task_status", "[encode]") {
    std::string out;
    append_approval_pending_event(out, "a_1", 1500, "waiting");
    CHECK(out == R"({"type":"approval_pending","approvalId":"a_1","timeoutMs":1500,)"
                 R"("message":"waiting"})");
    out.clear();
    append_events_dropped_event(out, 7, "slow \"client\"");
    CHECK(out == R"({"type":"events_dropped","count":7,"reason":"slow \"client\""})");
    out.clear();
    append_task_status_event(out, "working", std::nullopt);
    CHECK(out == R"({"type":"task_status","status":"working"})");
    out.clear();
    append_task_status_event(out, "failed", std::string_view("boom"));
    CHECK(out == R"({"type":"task_status","status":"failed","message":"boom"})");
}

TEST_CASE("tool events: progress keeps the tool's numbers and adds the fraction", "[encode]") {
    std::string out;
    append_progress_event(out, "1", std::string_view("4"), 0.25, std::string_view("a quarter"));
    CHECK(out == R"({"type":"progress","progress":1,"total":4,"fraction":0.25,)"
                 R"("message":"a quarter"})");
    out.clear();
    append_progress_event(out, "2.5e0", std::nullopt, std::nullopt, std::nullopt);
    CHECK(out == R"({"type":"progress","progress":2.5e0})");
}

TEST_CASE("tool events: a network sandbox_violation names the rule when there is one", "[encode]") {
    std::string out;
    append_network_violation_event(out, "example.com", 80, "refused", "");
    CHECK(out == R"({"type":"sandbox_violation","kind":"network","host":"example.com",)"
                 R"("port":80,"message":"refused"})");
    out.clear();
    append_network_violation_event(out, "example.com", 80, "refused", "add example.com");
    CHECK(out == R"({"type":"sandbox_violation","kind":"network","host":"example.com",)"
                 R"("port":80,"message":"refused","rule":"add example.com"})");
}

TEST_CASE("server frames: a tools_list frame's tail, with a page's total and a profile",
          "[encode]") {
    std::string out;
    append_tools_list_head(out, std::string_view("l1"));
    append_tools_list_tail(out);
    CHECK(out == R"({"type":"tools_list","protocol":1,"requestId":"l1","tools":[]})"
                 "\n");
    out.clear();
    append_tools_list_tail(out, 42, std::string_view("work"));
    CHECK(out == R"(],"total":42,"client":"work"})"
                 "\n");
    out.clear();
    append_tools_list_tail(out, std::nullopt, std::string_view("work"), 3);
    CHECK(out == R"(],"client":"work","hidden":3})"
                 "\n");
}

} // namespace unit_server_frames_test
