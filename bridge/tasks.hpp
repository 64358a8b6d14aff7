// tasks: the tasks `meith mcp` runs for its MCP client (MCP 2025-11-25
// basic/utilities/tasks; docs/protocol.md §17). A task-augmented tools/call is answered at once
// with a CreateTaskResult while its tool_call runs in meithd; tasks/get, tasks/result,
// tasks/cancel and tasks/list answer from this table. No I/O: the bridge sends what it returns.
#pragma once

#include "bridge/json.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace meith::bridge {

class task_table {
  public:
    /// Poll interval suggested to clients, ms.
    static constexpr std::uint64_t poll_interval_ms = 500;

    /// A finished task is kept at most this long, whatever ttl the client asked for, and at
    /// most this many finished tasks are kept (the oldest go first): the table lives in meithd
    /// for a handed-over session (docs/protocol.md §10), so a client cannot grow it forever.
    static constexpr std::uint64_t max_ttl_ms = 3600 * 1000;
    static constexpr std::size_t max_finished = 1024;

    /// A new task for the call meithd knows as `request_id`, kept `ttl_ms` (at most
    /// max_ttl_ms) after it ends; finished tasks past their ttl are forgotten first.
    /// Returns the CreateTaskResult `{"task":{taskId,status,ttl,createdAt,...}}`.
    json create(const std::string& request_id, std::uint64_t ttl_ms);

    /// The task's status changed (a task_status event of its call): `message` is shown.
    void working(const std::string& task_id, const std::string& message);

    /// The call ended: `answer` is its CallToolResult (`failed` false) or a JSON-RPC error
    /// object (`failed` true). Returns the ids of the tasks/result requests that waited, each
    /// to be answered with `result_of(task_id)`.
    std::vector<json> finish(const std::string& task_id, json answer, bool failed);

    /// tasks/get: the Task, or nullopt for an unknown id.
    std::optional<json> get(const std::string& task_id) const;
    /// tasks/list: `{"tasks":[…]}`.
    json list();

    /// tasks/result: the answer (with _meta related-task) when the task ended; otherwise the
    /// request `mcp_id` waits and nullopt is returned. `unknown` set for an unknown id.
    std::optional<json> result_or_wait(const std::string& task_id, const json& mcp_id,
                                       bool& unknown);
    /// The ended task's answer: `{"result":…}` or `{"error":…}` (JSON-RPC members).
    json result_of(const std::string& task_id) const;

    /// tasks/cancel: the request id of the call to cancel (nullopt when the task already ended,
    /// was cancelled or is unknown); the task is `cancelled` from now on, and ends when meithd
    /// answers the cancelled call (`finish`).
    std::optional<std::string> cancel(const std::string& task_id);

    /// Whether a tasks/result request waits for a task that has not ended.
    bool has_waiting() const {
        for (const auto& [id, t] : tasks_)
            if (!t.done && !t.waiting.empty()) return true;
        return false;
    }

    /// The task of call `request_id`, if it runs as one.
    std::optional<std::string> task_of(const std::string& request_id) const;

  private:
    struct task {
        std::string request_id;
        std::string status = "working";
        std::string message;
        std::string created_at, updated_at;
        std::uint64_t ttl_ms = 0;
        json answer;
        bool failed = false;
        bool done = false;
        std::chrono::steady_clock::time_point ended; ///< when done
        std::vector<json> waiting;                   ///< tasks/result requests waiting for the end
    };
    /// Forgets finished tasks past their ttl, then the oldest finished past max_finished.
    void sweep();
    json render(const std::string& id, const task& t) const;
    std::map<std::string, task> tasks_;
    std::map<std::string, std::string> by_request_;
    std::uint64_t next_ = 0;
};

} // namespace meith::bridge
