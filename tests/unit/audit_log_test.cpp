// audit_log tests: lines, torn-tail repair, rotation, over-long lines, JSON string escaping and
// write failures with recovery. Every test works in its own mkdtemp directory.
#include "audit/audit_log.hpp"
#include "audit/audit_trail.hpp"

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <cstdlib>
#include <sys/stat.h>

namespace fs = std::filesystem;
using meith::audit::append_json_string;
using meith::audit::audit_log;
using meith::config::audit_config;
using meith::config::fsync_policy;

namespace unit_audit_log_test { // one namespace per file: the tests build as unity batches

namespace {

struct temp_dir {
    fs::path path;
    temp_dir() {
        std::string tmpl = "/tmp/meith-audit-test-XXXXXX";
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const fs::path& p, const std::string& content) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << content;
}

std::vector<std::string> lines_of(const fs::path& p) {
    std::vector<std::string> lines;
    std::istringstream in(read_file(p));
    for (std::string line; std::getline(in, line);)
        lines.push_back(line);
    return lines;
}

std::string event_line(int seq, std::size_t padding = 0) {
    return nlohmann::json{{"ts", "2026-11-21T10:00:00.123Z"},
                          {"event", "call"},
                          {"seq", seq},
                          {"pad", std::string(padding, 'p')}}
        .dump();
}

std::string json_string(std::string_view s) {
    std::string out;
    append_json_string(out, s);
    return out;
}

/// Captures what the audit log reports through spdlog's default logger.
struct captured_log {
    std::ostringstream text;
    std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
    captured_log() {
        auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
        sink->set_pattern("%l %v");
        spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
    }
    ~captured_log() { spdlog::set_default_logger(previous); }
    std::size_t count(const std::string& needle) const {
        const std::string s = text.str();
        std::size_t n = 0;
        for (auto pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + 1))
            ++n;
        return n;
    }
};

} // namespace

TEST_CASE("appended lines are readable at once and each parses", "[audit_log]") {
    temp_dir dir;
    const auto path = dir.path / "audit.jsonl";
    audit_config cfg;
    audit_log log(path, cfg);
    CHECK(log.repaired_bytes() == 0);
    CHECK(log.path() == path);
    for (int i = 0; i < 10; ++i) {
        REQUIRE(log.append(event_line(i)));
        const auto lines = lines_of(path);
        REQUIRE(lines.size() == static_cast<std::size_t>(i + 1));
        CHECK(nlohmann::json::parse(lines.back()).at("seq") == i);
    }
    const std::string content = read_file(path);
    CHECK(content.back() == '\n');
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("a raw newline inside the object does not split the record", "[audit_log]") {
    temp_dir dir;
    const auto path = dir.path / "audit.jsonl";
    audit_log log(path, audit_config{});
    REQUIRE(log.append("{\"event\":\"x\",\n\"n\":1}"));
    const auto lines = lines_of(path);
    REQUIRE(lines.size() == 1);
    CHECK(nlohmann::json::parse(lines[0]).at("n") == 1);
}

TEST_CASE("a torn last line is cut on open", "[audit_log]") {
    temp_dir dir;
    const auto path = dir.path / "audit.jsonl";
    const std::string good = event_line(1) + "\n" + event_line(2) + "\n";
    SECTION("partial line after complete ones") {
        const std::string torn = R"({"ts":"2026-11-21T10:00:01.000Z","ev)";
        write_file(path, good + torn);
        audit_log log(path, audit_config{});
        CHECK(log.repaired_bytes() == torn.size());
        CHECK(read_file(path) == good);
        REQUIRE(log.append(event_line(3)));
        const auto lines = lines_of(path);
        REQUIRE(lines.size() == 3);
        for (const auto& l : lines)
            CHECK_NOTHROW(nlohmann::json::parse(l));
    }
    SECTION("no newline at all") {
        write_file(path, R"({"partial)");
        audit_log log(path, audit_config{});
        CHECK(log.repaired_bytes() == 9);
        CHECK(fs::file_size(path) == 0);
    }
    SECTION("torn line longer than the scan chunk") {
        const std::string torn = "{\"pad\":\"" + std::string(200000, 'x');
        write_file(path, good + torn);
        audit_log log(path, audit_config{});
        CHECK(log.repaired_bytes() == torn.size());
        CHECK(read_file(path) == good);
    }
    SECTION("intact file is left alone") {
        write_file(path, good);
        audit_log log(path, audit_config{});
        CHECK(log.repaired_bytes() == 0);
        CHECK(read_file(path) == good);
    }
}

TEST_CASE("opening an unusable path throws, naming it", "[audit_log]") {
    temp_dir dir;
    const auto path = dir.path / "missing-dir" / "audit.jsonl";
    try {
        audit_log log(path, audit_config{});
        FAIL("no exception");
    } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()).find(path.string()) != std::string::npos);
    }
}

TEST_CASE("rotation keeps the newest files and loses no line", "[audit_log]") {
    temp_dir dir;
    const auto path = dir.path / "audit.jsonl";
    auto numbered = [&](int i) { return fs::path(path.string() + "." + std::to_string(i)); };
    audit_config cfg;
    cfg.max_bytes = 400;

    SECTION("keep = 2") {
        cfg.keep = 2;
        audit_log log(path, cfg);
        const int total = 40;
        for (int i = 0; i < total; ++i)
            REQUIRE(log.append(event_line(i)));
        CHECK(fs::exists(numbered(1)));
        CHECK(fs::exists(numbered(2)));
        CHECK_FALSE(fs::exists(numbered(3)));
        // Oldest to newest: .2, .1, current; their lines are consecutive and end with the last.
        std::vector<int> seqs;
        for (const auto& p : {numbered(2), numbered(1), path}) {
            CHECK(fs::file_size(p) <= cfg.max_bytes);
            for (const auto& l : lines_of(p))
                seqs.push_back(nlohmann::json::parse(l).at("seq"));
        }
        REQUIRE_FALSE(seqs.empty());
        CHECK(seqs.back() == total - 1);
        for (std::size_t i = 1; i < seqs.size(); ++i)
            CHECK(seqs[i] == seqs[i - 1] + 1);
        CHECK(seqs.size() < static_cast<std::size_t>(total)); // older lines were dropped
    }
    SECTION("keep large enough: every line survives, exactly once") {
        cfg.keep = 100;
        const int total = 200;
        {
            audit_log log(path, cfg);
            for (int i = 0; i < total; ++i)
                REQUIRE(log.append(event_line(i)));
        }
        std::vector<int> seqs;
        for (int i = 100; i >= 1; --i)
            if (fs::exists(numbered(i)))
                for (const auto& l : lines_of(numbered(i)))
                    seqs.push_back(nlohmann::json::parse(l).at("seq"));
        for (const auto& l : lines_of(path))
            seqs.push_back(nlohmann::json::parse(l).at("seq"));
        REQUIRE(seqs.size() == static_cast<std::size_t>(total));
        for (int i = 0; i < total; ++i)
            CHECK(seqs[static_cast<std::size_t>(i)] == i);
    }
    SECTION("keep = 0 drops the old file") {
        cfg.keep = 0;
        audit_log log(path, cfg);
        for (int i = 0; i < 20; ++i)
            REQUIRE(log.append(event_line(i)));
        CHECK_FALSE(fs::exists(numbered(1)));
        const auto lines = lines_of(path);
        REQUIRE_FALSE(lines.empty());
        CHECK(nlohmann::json::parse(lines.back()).at("seq") == 19);
        CHECK(fs::file_size(path) <= cfg.max_bytes);
    }
    SECTION("max_bytes = 0 never rotates") {
        cfg.max_bytes = 0;
        audit_log log(path, cfg);
        for (int i = 0; i < 50; ++i)
            REQUIRE(log.append(event_line(i)));
        CHECK_FALSE(fs::exists(numbered(1)));
        CHECK(lines_of(path).size() == 50);
    }
    SECTION("size is taken from the existing file at open") {
        cfg.keep = 1;
        write_file(path, event_line(-1, 350) + "\n");
        audit_log log(path, cfg);
        REQUIRE(log.append(event_line(0)));
        CHECK(lines_of(numbered(1)).size() == 1);
        CHECK(lines_of(path).size() == 1);
    }
}

TEST_CASE("fsync policies all write every line", "[audit_log]") {
    temp_dir dir;
    for (auto policy : {fsync_policy::never, fsync_policy::always, fsync_policy::interval}) {
        const auto path = dir.path / ("audit-" + std::to_string(static_cast<int>(policy)));
        audit_config cfg;
        cfg.fsync = policy;
        audit_log log(path, cfg);
        for (int i = 0; i < 5; ++i)
            REQUIRE(log.append(event_line(i)));
        log.flush();
        CHECK(lines_of(path).size() == 5);
    }
}

TEST_CASE("lines built from pieces: summaries are redacted when written, in every fsync mode",
          "[audit_log]") {
    temp_dir dir;
    for (auto policy : {fsync_policy::never, fsync_policy::always, fsync_policy::interval}) {
        CAPTURE(static_cast<int>(policy));
        const auto path = dir.path / ("pieces-" + std::to_string(static_cast<int>(policy)));
        audit_config cfg;
        cfg.fsync = policy;
        audit_log log(path, cfg);
        const int total = 30;
        std::uint64_t last = 0;
        for (int i = 0; i < total; ++i) {
            log.begin_line() += R"({"event":"call","n":)" + std::to_string(i) + R"(,"args":)";
            log.begin_summary() += R"({"password":"hunter2","path":"/tmp/x","token":"abc"})";
            log.end_summary() += R"(,"result":)";
            log.begin_summary() +=
                i % 2 ? "not json"
                      : R"({"ok":true,"content":"ghp_)" + std::string(36, 'a') + R"("})";
            log.end_summary() += "}";
            log.end_line();
            if (i % 7 == 6) last = log.submit(); // several batches, not waited for one by one
        }
        CHECK(log.has_pending());
        const auto seq = log.submit();
        CHECK(seq > last);
        CHECK_FALSE(log.has_pending());
        CHECK(log.submit() == seq); // nothing new: the same sequence number
        log.wait_committed(seq);
        CHECK(log.committed() >= seq);
        const auto lines = lines_of(path);
        REQUIRE(lines.size() == static_cast<std::size_t>(total));
        for (int i = 0; i < total; ++i) {
            const auto j = nlohmann::json::parse(lines[static_cast<std::size_t>(i)]);
            CHECK(j.at("n") == i); // in order
            CHECK(j.at("args").at("password") == "[REDACTED]");
            CHECK(j.at("args").at("token") == "[REDACTED]");
            CHECK(j.at("args").at("path") == "/tmp/x");
            if (i % 2)
                CHECK(j.at("result") == "[invalid JSON: 8 bytes]");
            else
                CHECK(j.at("result").at("content") == "[REDACTED]");
        }
        CHECK(read_file(path).find("hunter2") == std::string::npos);
        CHECK(read_file(path).find("ghp_") == std::string::npos);
    }
}

TEST_CASE("the writer thread commits queued batches in order and tells the listener",
          "[audit_log]") {
    temp_dir dir;
    const auto path = dir.path / "audit.jsonl";
    audit_config cfg;
    cfg.fsync = fsync_policy::always; // every batch goes through the writer thread
    std::atomic<int> told{0};
    std::uint64_t seq = 0;
    {
        audit_log log(path, cfg);
        log.set_commit_listener([&] { ++told; });
        for (int b = 0; b < 40; ++b) {
            for (int k = 0; k < 3; ++k)
                log.append_deferred(event_line(b * 3 + k));
            const auto next = log.submit();
            CHECK(next == seq + 1);
            seq = next;
        }
        log.wait_committed(seq);
        CHECK(log.committed() == seq);
        CHECK(told.load() >= 1);
        log.set_commit_listener(nullptr);
        CHECK_FALSE(log.failing());
    }
    const auto lines = lines_of(path);
    REQUIRE(lines.size() == 120);
    for (std::size_t i = 0; i < lines.size(); ++i)
        CHECK(nlohmann::json::parse(lines[i]).at("seq") == static_cast<int>(i));
}

TEST_CASE("rotation deletes the oldest file off the append path and leaves no expired file",
          "[audit_log]") {
    temp_dir dir;
    const auto path = dir.path / "audit.jsonl";
    audit_config cfg;
    cfg.max_bytes = 300;
    cfg.keep = 1;
    {
        audit_log log(path, cfg);
        for (int i = 0; i < 30; ++i)
            REQUIRE(log.append(event_line(i)));
    } // the destructor waits for the writer thread, which deletes `.expired`
    CHECK(fs::exists(path.string() + ".1"));
    CHECK_FALSE(fs::exists(path.string() + ".2"));
    CHECK_FALSE(fs::exists(path.string() + ".expired"));
    const auto last = lines_of(path);
    REQUIRE_FALSE(last.empty());
    CHECK(nlohmann::json::parse(last.back()).at("seq") == 29);
}

TEST_CASE("lines over 16 KiB are replaced by a short line", "[audit_log]") {
    temp_dir dir;
    const auto path = dir.path / "audit.jsonl";
    audit_log log(path, audit_config{});
    const std::string big = nlohmann::json{{"ts", "2026-11-21T10:00:00.123Z"},
                                           {"event", "call_end"},
                                           {"requestId", "r-42"},
                                           {"result", std::string(20000, 'r')}}
                                .dump();
    REQUIRE(log.append(big));
    // Exactly at the limit (16383 + newline) is kept whole.
    std::string at_limit = R"({"event":"fits","pad":")";
    at_limit += std::string(16383 - at_limit.size() - 2, 'f') + "\"}";
    REQUIRE(at_limit.size() == 16383);
    REQUIRE(log.append(at_limit));
    // No ts at all: one is added.
    REQUIRE(log.append(R"({"event":"x","requestId":7,"pad":")" + std::string(17000, 'q') + "\"}"));

    const auto lines = lines_of(path);
    REQUIRE(lines.size() == 3);
    const auto cut = nlohmann::json::parse(lines[0]);
    CHECK(lines[0].size() < 200);
    CHECK(cut.at("ts") == "2026-11-21T10:00:00.123Z");
    CHECK(cut.at("event") == "call_end");
    CHECK(cut.at("requestId") == "r-42");
    CHECK(cut.at("cut") == "line over 16384 bytes (" + std::to_string(big.size() + 1) + " bytes)");
    CHECK_FALSE(cut.contains("result"));
    CHECK(lines[1] == at_limit);
    const auto third = nlohmann::json::parse(lines[2]);
    CHECK(third.at("requestId") == 7);
    CHECK(third.at("ts").is_string());
    CHECK(third.contains("cut"));
}

TEST_CASE("append_json_string escapes per RFC 8259", "[audit_log]") {
    CHECK(json_string("plain text") == R"("plain text")");
    CHECK(json_string("") == R"("")");
    CHECK(json_string("say \"hi\"") == R"("say \"hi\"")");
    CHECK(json_string("C:\\dir") == R"("C:\\dir")");
    CHECK(json_string("a\nb\tc\rd\be\ff") == R"("a\nb\tc\rd\be\ff")");
    CHECK(json_string(std::string_view("\x00\x01\x1f", 3)) == R"("\u0000\u0001\u001f")");
    CHECK(json_string("\x7f") == "\"\x7f\"");
    CHECK(json_string("/") == R"("/")");
    // Valid multibyte UTF-8 passes through unchanged.
    CHECK(json_string("Grüße 日本 🙂") == "\"Grüße 日本 🙂\"");
    // Invalid UTF-8: lone continuation, bad lead, truncated, overlong, surrogate, > U+10FFFF.
    const std::string fffd = "\xEF\xBF\xBD";
    CHECK(json_string("a\x80z") == "\"a" + fffd + "z\"");
    CHECK(json_string("\xff") == "\"" + fffd + "\"");
    CHECK(json_string("x\xe2\x82") == "\"x" + fffd + fffd + "\"");
    CHECK(json_string("\xc0\xaf") == "\"" + fffd + fffd + "\"");
    CHECK(json_string("\xed\xa0\x80") == "\"" + fffd + fffd + fffd + "\"");
    CHECK(json_string("\xf4\x90\x80\x80") == "\"" + fffd + fffd + fffd + fffd + "\"");
    // Appends, keeping what is there.
    std::string out = "[";
    append_json_string(out, "q\"");
    CHECK(out == R"(["q\"")");
    // Round trip of every byte value through a JSON parser.
    std::string all;
    for (int c = 1; c < 128; ++c)
        all += static_cast<char>(c);
    CHECK(nlohmann::json::parse(json_string(all)).get<std::string>() == all);
    // Special bytes at every offset of a longer string (the 8-byte fast path must stop).
    for (std::string special : {"\"", "\\", "\x01", "\x1f", "\n", "é", "🙂"}) {
        for (std::size_t pos = 0; pos < 40; ++pos) {
            std::string s(40, 'a');
            s.insert(pos, special);
            INFO("pos " << pos << " special " << special);
            CHECK(nlohmann::json::parse(json_string(s)).get<std::string>() == s);
        }
        std::string bad(40, 'b');
        bad[17] = '\xff';
        CHECK(json_string(bad) == "\"" + bad.substr(0, 17) + fffd + bad.substr(18) + "\"");
    }
}

TEST_CASE("now_rfc3339 is UTC with milliseconds", "[audit_log]") {
    const std::string ts = meith::audit::now_rfc3339();
    CHECK(std::regex_match(ts, std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)")));
    CHECK(ts >= "2024");
}

/// The log looks at its path at most once per millisecond (audit_log::ensure_open).
static void past_path_check() {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

TEST_CASE("write failures are reported and recovered from", "[audit_log]") {
    SECTION("a full device fails every append") {
        captured_log captured;
        audit_log log("/dev/full", audit_config{});
        CHECK_FALSE(log.append(event_line(1)));
        CHECK_FALSE(log.append(event_line(2)));
        CHECK(captured.count("error ") == 1); // once per failure streak
        CHECK(captured.count("/dev/full") >= 1);
    }
    SECTION("the path turned into a directory, then back") {
        temp_dir dir;
        const auto path = dir.path / "audit.jsonl";
        captured_log captured;
        audit_log log(path, audit_config{});
        REQUIRE(log.append(event_line(1)));
        fs::remove(path);
        fs::create_directory(path);
        past_path_check();
        CHECK_FALSE(log.append(event_line(2)));
        CHECK_FALSE(log.append(event_line(3)));
        CHECK(captured.count("error ") == 1);
        fs::remove(path);
        CHECK(log.append(event_line(4)));
        CHECK(captured.count("info ") == 1);
        const auto lines = lines_of(path);
        REQUIRE(lines.size() == 1);
        CHECK(nlohmann::json::parse(lines[0]).at("seq") == 4);
        // A second streak is reported again.
        fs::remove(path);
        fs::create_directory(path);
        past_path_check();
        CHECK_FALSE(log.append(event_line(5)));
        CHECK(captured.count("error ") == 2);
        fs::remove(path);
    }
    SECTION("failed batches are told apart from written ones") {
        temp_dir dir;
        const auto path = dir.path / "audit.jsonl";
        captured_log captured;
        audit_log log(path, audit_config{});
        REQUIRE(log.append(event_line(1))); // batch 1: written
        fs::remove(path);
        fs::create_directory(path);
        past_path_check();
        CHECK_FALSE(log.append(event_line(2))); // batches 2 and 3: failed
        CHECK_FALSE(log.append(event_line(3)));
        fs::remove(path);
        CHECK(log.append(event_line(4))); // batch 4: written
        CHECK_FALSE(log.failed_between(0, 1));
        CHECK(log.failed_between(0, 2));
        CHECK(log.failed_between(1, 4));
        CHECK(log.failed_between(2, 3));
        CHECK_FALSE(log.failed_between(3, 4));
        CHECK_FALSE(log.failed_between(4, 4));
    }
    SECTION("a removed file is recreated, not written into the void") {
        temp_dir dir;
        const auto path = dir.path / "audit.jsonl";
        audit_log log(path, audit_config{});
        REQUIRE(log.append(event_line(1)));
        fs::remove(path);
        past_path_check();
        REQUIRE(log.append(event_line(2)));
        const auto lines = lines_of(path);
        REQUIRE(lines.size() == 1);
        CHECK(nlohmann::json::parse(lines[0]).at("seq") == 2);
    }
    SECTION("a file renamed away (logrotate without copytruncate) is followed by a new one") {
        temp_dir dir;
        const auto path = dir.path / "audit.jsonl";
        audit_log log(path, audit_config{});
        REQUIRE(log.append(event_line(1)));
        fs::rename(path, dir.path / "audit.jsonl.old");
        past_path_check();
        REQUIRE(log.append(event_line(2)));
        const auto now = lines_of(path);
        REQUIRE(now.size() == 1);
        CHECK(nlohmann::json::parse(now[0]).at("seq") == 2);
        CHECK(lines_of(dir.path / "audit.jsonl.old").size() == 1);
    }
}

TEST_CASE("audit_trail::commit_then: the I/O thread does not wait for the write, the lines "
          "arrive, none is lost at shutdown",
          "[audit_log]") {
    temp_dir dir;
    const auto path = dir.path / "audit.jsonl";
    audit_config cfg;
    cfg.fsync = fsync_policy::always; // every batch through the writer thread, fsynced
    {
        asio::io_context ioc;
        auto work = asio::make_work_guard(ioc); // run_for waits for the writer's post
        audit_log log(path, cfg);
        meith::audit::audit_trail trail(ioc.get_executor(), &log);
        bool ran = false;
        for (int i = 0; i < 50; ++i) {
            trail.event("connection_rejected", R"("n":)" + std::to_string(i));
            trail.commit_then([&ran, &trail, i] {
                // Runs on the I/O thread once its line is on file.
                if (i == 49) ran = trail.committed(trail.high_seq());
            });
        }
        for (int i = 0; i < 500 && !ran; ++i)
            ioc.run_for(std::chrono::milliseconds(10));
        CHECK(ran);
        CHECK(lines_of(path).size() == 50);
        // Shutdown with lines submitted but not yet waited for: the log's destructor writes them.
        for (int i = 0; i < 20; ++i) {
            trail.event("connection_close", R"("n":)" + std::to_string(i));
            trail.commit_then([] {});
        }
    }
    const auto lines = lines_of(path);
    REQUIRE(lines.size() == 70);
    CHECK(nlohmann::json::parse(lines.back()).at("event") == "connection_close");
}

} // namespace unit_audit_log_test
