// audit_trail: lines into the pending batch, group commit, waiting replies (see the header).
#include "audit/audit_trail.hpp"

#include "protocol/json_writer.hpp"

#include <asio/post.hpp>

#include <algorithm>

namespace meith::audit {

audit_trail::audit_trail(asio::any_io_executor ex, audit::audit_log* log, bool fail_closed)
    : ex_(std::move(ex)), log_(log), fail_closed_(fail_closed) {
    if (log_)
        // The writer thread tells the I/O thread that lines are in the file; the replies that
        // waited for them go out there.
        log_->set_commit_listener([this, alive = std::weak_ptr<bool>(alive_)] {
            asio::post(ex_, [this, alive] {
                if (alive.lock()) run_waiters();
            });
        });
}

audit_trail::~audit_trail() {
    if (log_) log_->set_commit_listener(nullptr);
}

void audit_trail::end_line() {
    log_->end_line();
    if (!commit_posted_) {
        // Whatever queued it, the line is submitted by the end of this I/O turn.
        commit_posted_ = true;
        asio::post(ex_, [this, alive = std::weak_ptr<bool>(alive_)] {
            if (!alive.lock()) return;
            commit_posted_ = false;
            commit();
        });
    }
}

bool audit_trail::event(std::string_view event, std::string_view fields_json) {
    if (!log_) return true;
    std::string& l = log_->begin_line();
    l.append(R"({"ts":)");
    audit::append_rfc3339_json(l);
    l.append(R"(,"event":)");
    protocol::append_json_string(l, event);
    if (!fields_json.empty()) {
        l.push_back(',');
        l.append(fields_json);
    }
    l.push_back('}');
    end_line();
    return !failing();
}

std::uint64_t audit_trail::commit() {
    if (!log_) return 0;
    const auto seq = log_->submit();
    // A batch written inline by submit() has no writer notification: waiters run here.
    if (!waiters_.empty()) run_waiters();
    return seq;
}

void audit_trail::commit_now() {
    if (!log_) return;
    log_->wait_committed(commit());
    run_waiters();
}

void audit_trail::after(std::uint64_t seq, std::function<void()> fn) {
    if (committed(seq)) {
        fn();
        return;
    }
    waiters_.emplace_back(seq, std::move(fn));
}

void audit_trail::run_waiters() {
    if (!log_ || waiters_.empty()) return;
    const auto done = log_->committed();
    // Waiters are few (one per connection with replies waiting); run the ready ones in order.
    auto ready = std::stable_partition(waiters_.begin(), waiters_.end(),
                                       [done](const auto& w) { return w.first > done; });
    std::vector<std::function<void()>> run;
    run.reserve(static_cast<std::size_t>(waiters_.end() - ready));
    for (auto it = ready; it != waiters_.end(); ++it)
        run.push_back(std::move(it->second));
    waiters_.erase(ready, waiters_.end());
    for (auto& fn : run)
        fn();
}

} // namespace meith::audit
