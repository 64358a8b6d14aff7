// redacting_sink: redacts each message's payload, then hands a copy of the message to the
// wrapped sink, which keeps its own formatting.
#include "audit/redacting_sink.hpp"

#include "audit/redactor.hpp"

#include <string>

namespace meith::audit {

redacting_sink::redacting_sink(std::shared_ptr<spdlog::sinks::sink> inner)
    : inner_(std::move(inner)) {
}

void redacting_sink::sink_it_(const spdlog::details::log_msg& msg) {
    if (!inner_->should_log(msg.level)) return;
    // `redacted` must outlive the inner call: the copy's payload is a view into it.
    const std::string redacted =
        default_redactor().redact_text(std::string_view(msg.payload.data(), msg.payload.size()));
    spdlog::details::log_msg copy(msg);
    copy.payload = spdlog::string_view_t(redacted.data(), redacted.size());
    inner_->log(copy);
}

void redacting_sink::flush_() {
    inner_->flush();
}

void redacting_sink::set_pattern_(const std::string& pattern) {
    inner_->set_pattern(pattern);
}

void redacting_sink::set_formatter_(std::unique_ptr<spdlog::formatter> sink_formatter) {
    inner_->set_formatter(std::move(sink_formatter));
}

} // namespace meith::audit
