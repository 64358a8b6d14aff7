// redacting_sink: an spdlog sink that passes every message through the redactor before
// handing it to the wrapped sink, so no secret reaches the daemon's own log (docs/protocol.md §6).
#pragma once

#include <memory>
#include <mutex>
#include <spdlog/sinks/base_sink.h>
#include <string>

namespace meith::audit {

class redacting_sink final : public spdlog::sinks::base_sink<std::mutex> {
  public:
    explicit redacting_sink(std::shared_ptr<spdlog::sinks::sink> inner);

  protected:
    void sink_it_(const spdlog::details::log_msg& msg) override;
    void flush_() override;
    /// Patterns and formatters belong to the wrapped sink, which does the formatting.
    void set_pattern_(const std::string& pattern) override;
    void set_formatter_(std::unique_ptr<spdlog::formatter> sink_formatter) override;

  private:
    std::shared_ptr<spdlog::sinks::sink> inner_;
};

} // namespace meith::audit
