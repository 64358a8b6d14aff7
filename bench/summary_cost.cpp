// bench/summary_cost.cpp — what the audit trail's redacted summary of one tool result costs,
// by the size and kind of the result (issue "Audit and trust", (e) in docs/benchmarks.md).
//
// Builds a tool result `{"content":[{"type":"text","text":"<text>"}]}` whose text is N bytes of
// prose (spaces and `key=value` pairs, so the secret rules have to look), or N bytes of 'x'
// (nothing for them to look at), and times audit::redactor::append_summary_json on it — the
// call the audit writer makes for every result — on one thread after a warm-up.
//
// Prints ONE JSON line: {"mode":"summary_cost","results":[{"kind":..,"bytes":..,
//   "iterations":..,"us_per_summary":..,"summary_bytes":..},...]}
#include "audit/redactor.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

std::string result_json(const std::string& text) {
    std::string j = R"({"content":[{"type":"text","text":")";
    j += text;
    j += R"("}]})";
    return j;
}

std::string filled(std::size_t bytes, bool prose) {
    static const std::string sentence = "the build finished: status=ok, 42 files in 1.3 s; ";
    std::string s;
    s.reserve(bytes + sentence.size());
    while (s.size() < bytes)
        s += prose ? sentence : std::string(64, 'x');
    s.resize(bytes);
    return s;
}

} // namespace

int main() {
    const auto& redactor = meith::audit::default_redactor();
    std::string out = R"({"mode":"summary_cost","results":[)";
    bool first = true;
    for (const bool prose : {false, true}) {
        for (const std::size_t bytes : {64ul, 1024ul, 16384ul, 1048576ul, 10485760ul}) {
            const std::string json = result_json(filled(bytes, prose));
            std::string summary;
            redactor.append_summary_json(summary, json); // warm-up (the rules' automata)
            // Enough iterations for ~0.2 s per case, at least 3.
            const auto t0 = std::chrono::steady_clock::now();
            int iterations = 0;
            double elapsed_us = 0;
            do {
                summary.clear();
                redactor.append_summary_json(summary, json);
                ++iterations;
                elapsed_us =
                    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                        .count();
            } while (iterations < 3 || elapsed_us < 200000);
            char row[256];
            std::snprintf(row, sizeof row,
                          R"(%s{"kind":"%s","bytes":%zu,"iterations":%d,"us_per_summary":%.3f,)"
                          R"("summary_bytes":%zu})",
                          first ? "" : ",", prose ? "prose" : "plain", bytes, iterations,
                          elapsed_us / iterations, summary.size());
            out += row;
            first = false;
        }
    }
    out += "]}";
    std::puts(out.c_str());
}
