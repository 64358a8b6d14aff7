// tasks: the tasks `meith mcp` runs for its MCP client (see mcp_tasks.hpp).
#include "bridge/tasks.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace meith::bridge {

namespace {
std::string now_rfc3339() {
    const auto now = std::chrono::system_clock::now();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch());
    return fmt::format("{:%FT%T}.{:03}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(now)),
                       ms.count() % 1000);
}
} // namespace

json task_table::render(const std::string& id, const task& t) const {
    json j{{"taskId", id},
           {"status", t.status},
           {"createdAt", t.created_at},
           {"lastUpdatedAt", t.updated_at},
           {"ttl", t.ttl_ms},
           {"pollInterval", poll_interval_ms}};
    if (!t.message.empty()) j["statusMessage"] = t.message;
    return j;
}

void task_table::sweep() {
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> finished;
    for (auto it = tasks_.begin(); it != tasks_.end();) {
        const task& t = it->second;
        if (t.done && t.waiting.empty() && now - t.ended >= std::chrono::milliseconds(t.ttl_ms)) {
            it = tasks_.erase(it);
            continue;
        }
        if (t.done) finished.emplace_back(t.ended, it->first);
        ++it;
    }
    if (finished.size() <= max_finished) return;
    std::sort(finished.begin(), finished.end());
    for (std::size_t i = 0; i + max_finished < finished.size(); ++i)
        tasks_.erase(finished[i].second);
}

json task_table::create(const std::string& request_id, std::uint64_t ttl_ms) {
    sweep();
    ttl_ms = std::min(ttl_ms, max_ttl_ms);
    const std::string id = fmt::format("meith-task-{}", ++next_);
    task t;
    t.request_id = request_id;
    t.created_at = t.updated_at = now_rfc3339();
    t.ttl_ms = ttl_ms;
    by_request_[request_id] = id;
    const json out{{"task", render(id, t)}};
    tasks_.emplace(id, std::move(t));
    return out;
}

void task_table::working(const std::string& task_id, const std::string& message) {
    auto it = tasks_.find(task_id);
    if (it == tasks_.end() || it->second.done) return;
    it->second.message = message;
    it->second.updated_at = now_rfc3339();
}

std::vector<json> task_table::finish(const std::string& task_id, json answer, bool failed) {
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return {};
    task& t = it->second;
    by_request_.erase(t.request_id);
    if (t.done) return {};
    t.done = true;
    t.ended = std::chrono::steady_clock::now();
    t.updated_at = now_rfc3339();
    if (t.status != "cancelled") { // a cancelled task keeps its status; result_of says so
        t.failed = failed;
        t.status = failed ? "failed" : "completed";
        t.answer = std::move(answer);
    }
    return std::exchange(t.waiting, {});
}

std::optional<json> task_table::get(const std::string& task_id) const {
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return std::nullopt;
    return render(it->first, it->second);
}

json task_table::list() {
    sweep();
    json tasks = json::array();
    for (const auto& [id, t] : tasks_)
        tasks.push_back(render(id, t));
    return {{"tasks", std::move(tasks)}};
}

std::optional<json> task_table::result_or_wait(const std::string& task_id, const json& mcp_id,
                                               bool& unknown) {
    auto it = tasks_.find(task_id);
    unknown = it == tasks_.end();
    if (unknown) return std::nullopt;
    if (it->second.done) return result_of(task_id);
    it->second.waiting.push_back(mcp_id);
    return std::nullopt;
}

json task_table::result_of(const std::string& task_id) const {
    const task& t = tasks_.at(task_id);
    if (t.status == "cancelled")
        return {{"error", {{"code", -32603}, {"message", "the task was cancelled"}}}};
    if (t.failed) return {{"error", t.answer}};
    json result = t.answer;
    if (result.is_object())
        result["_meta"]["io.modelcontextprotocol/related-task"] = {{"taskId", task_id}};
    return {{"result", std::move(result)}};
}

std::optional<std::string> task_table::cancel(const std::string& task_id) {
    auto it = tasks_.find(task_id);
    if (it == tasks_.end() || it->second.done || it->second.status == "cancelled")
        return std::nullopt;
    task& t = it->second;
    t.status = "cancelled"; // ends (finish) when meithd answers the cancelled call
    t.updated_at = now_rfc3339();
    return t.request_id;
}

std::optional<std::string> task_table::task_of(const std::string& request_id) const {
    auto it = by_request_.find(request_id);
    if (it == by_request_.end()) return std::nullopt;
    return it->second;
}

} // namespace meith::bridge
