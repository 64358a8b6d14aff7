// recording_link: an MCP session's host for tests (tests/unit/mcp_session_test.cpp,
// tests/fuzz/fuzz_mcp_session.cpp). Always connected, it keeps every frame the session sends
// meithd and every line it writes the client, as text, and counts lines that are not exactly
// one line ending in a newline.
#pragma once

#include "bridge/mcp_session.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::test {

class recording_link : public bridge::link {
  public:
    bool connected() const override { return true; }
    std::optional<bridge::json> connect(const std::string&, const std::string&,
                                        std::string&) override {
        return std::nullopt;
    }
    bool send(const std::string& frame, std::string&) override {
        frames.push_back(frame);
        return true;
    }
    void disconnect() override {}
    void write_client(std::string_view line) override {
        if (line.empty() || line.find('\n') != line.size() - 1) ++not_one_line;
        answers.emplace_back(line);
    }
    void note(std::string_view) override {}

    std::vector<std::string> frames;  ///< compact frames, as sent
    std::vector<std::string> answers; ///< JSON-RPC lines, with their newline
    std::size_t not_one_line = 0;     ///< answers that were not exactly one line
};

} // namespace meith::test
