// call: a call's resolution (the first wins), its events, and the list of calls in flight.
#include "tools/call.hpp"

#include "audit/redactor.hpp"
#include "protocol/json_writer.hpp"

namespace meith::tools {

using protocol::tool_result;

mcp_answer mcp_error(int code, std::string_view message) {
    mcp_answer a;
    a.json = "{";
    protocol::json_members m(a.json);
    m.key("code") += std::to_string(code); // a JSON-RPC error code is negative
    m.string("message", message);
    a.json += '}';
    return a;
}

// ---- call ----------------------------------------------------------------------------

call::call(asio::any_io_executor ex, std::shared_ptr<call_sink> sink)
    : sink_(std::move(sink)), ex_(std::move(ex)) {
}

call::~call() {
    if (list_) list_->remove(*this); // never left dangling in the list
}

void call::emit(std::string_view event_json) {
    if (resolved_ || tool_done_ || !sink_) return;
    if (audit::holds_exact_secret(event_json)) {
        std::string redacted(event_json); // a secret the tool echoes stays with it
        audit::redact_exact_secrets(redacted);
        return sink_->on_tool_event(request_id, redacted);
    }
    sink_->on_tool_event(request_id, event_json);
}

namespace {

/// A tool's result with each exact secret value replaced (docs/security.md "Secrets").
void redact_result(tool_result& r) {
    audit::redact_exact_secrets(r.content_json);
    audit::redact_exact_secrets(r.meta_json);
    audit::redact_exact_secrets(r.diagnostics_json);
    audit::redact_exact_secrets(r.model_content_json);
    if (r.error) {
        audit::redact_exact_secrets(r.error->message);
        audit::redact_exact_secrets(r.error->details_json);
    }
}

} // namespace

void call::resolve(tool_result result, call_end how) {
    if (resolved_) return;
    if (how == call_end::tool) {
        redact_result(result);
        if (tool_done_) return;
        tool_done_ = true;
        abandon_ = nullptr; // the tool is no longer running: nothing to undo
        if (owner_) {
            owner_->after_tool(shared_from_this(), std::move(result));
            return;
        }
    }
    finalize(std::move(result), how);
}

void call::finalize(tool_result result, call_end how) {
    if (resolved_) return;
    resolved_ = true;
    end_ = how;
    if (deadline_) deadline_->cancel();
    auto abandon = std::move(abandon_);
    abandon_ = nullptr;
    if (how != call_end::tool && abandon) abandon();
    if (owner_) owner_->finish(*this, result);
    if (sink_) sink_->on_tool_result(request_id, result);
    sink_.reset(); // breaks the connection <-> call cycle
}

// ---- call_list -------------------------------------------------------------------------

call_list::~call_list() {
    while (head_)
        remove(*head_);
}

void call_list::add(call& c) {
    if (c.list_) return;
    c.list_ = this;
    c.prev_ = nullptr;
    c.next_ = head_;
    if (head_) head_->prev_ = &c;
    head_ = &c;
    ++size_;
}

void call_list::remove(call& c) {
    if (c.list_ != this) return;
    c.list_ = nullptr;
    if (c.prev_)
        c.prev_->next_ = c.next_;
    else
        head_ = c.next_;
    if (c.next_) c.next_->prev_ = c.prev_;
    c.prev_ = c.next_ = nullptr;
    --size_;
}

std::vector<call_ptr> call_list::snapshot() const {
    std::vector<call_ptr> calls;
    calls.reserve(size_);
    for (call* c = head_; c != nullptr; c = c->next_)
        calls.push_back(c->shared_from_this());
    return calls;
}

} // namespace meith::tools
