// protocol::pipe_writer against a real pipe: batching per I/O turn, order, the bound, a reader
// that is gone, and a writer destroyed with a write in flight.
#include "protocol/pipe_writer.hpp"

#include <asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <csignal>
#include <fcntl.h>
#include <string>
#include <unistd.h>

using meith::protocol::pipe_writer;

namespace unit_pipe_writer_test { // one namespace per file: the tests build as unity batches

namespace {

struct pipe_pair {
    int read_end = -1;
    int write_end = -1;
    pipe_pair() {
        int fds[2];
        REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
        read_end = fds[0];
        write_end = fds[1];
    }
    ~pipe_pair() {
        if (read_end >= 0) ::close(read_end);
    }
    /// Everything the pipe holds now (the read end is made non-blocking).
    std::string drain() const {
        ::fcntl(read_end, F_SETFL, O_NONBLOCK);
        std::string out;
        char buf[65536];
        for (;;) {
            const ssize_t n = ::read(read_end, buf, sizeof buf);
            if (n <= 0) break;
            out.append(buf, static_cast<std::size_t>(n));
        }
        return out;
    }
};

} // namespace

TEST_CASE("pipe_writer: what one turn queues goes out in one write, in order") {
    asio::io_context io;
    pipe_pair p;
    asio::posix::stream_descriptor out(io, p.write_end);
    pipe_writer w(out, 1 << 20);
    REQUIRE(w.write("one\n"));
    REQUIRE(w.write("two\n"));
    REQUIRE(w.write("three\n"));
    // Nothing is written before the turn ends.
    CHECK(p.drain().empty());
    CHECK(w.pending() == 14);
    io.run();
    CHECK(p.drain() == "one\ntwo\nthree\n");
    CHECK(w.pending() == 0);
}

TEST_CASE("pipe_writer: past its bound a write is refused and nothing of it is queued") {
    asio::io_context io;
    pipe_pair p;
    asio::posix::stream_descriptor out(io, p.write_end);
    pipe_writer w(out, 8);
    REQUIRE(w.write("0123456789\n")); // one frame may pass the bound
    CHECK_FALSE(w.write("more\n"));   // but then nothing more waits
    CHECK(w.pending() == 11);
    io.run();
    CHECK(p.drain() == "0123456789\n");
    CHECK(w.write("after\n")); // drained: room again
    io.restart();
    io.run();
    CHECK(p.drain() == "after\n");
}

TEST_CASE("pipe_writer: a reader that is gone is reported once per failed write") {
    std::signal(SIGPIPE, SIG_IGN);
    asio::io_context io;
    pipe_pair p;
    ::close(p.read_end);
    p.read_end = -1;
    asio::posix::stream_descriptor out(io, p.write_end);
    int errors = 0;
    std::error_code seen;
    pipe_writer w(out, 1 << 20, [&](const std::error_code& ec) {
        ++errors;
        seen = ec;
    });
    REQUIRE(w.write("lost\n"));
    io.run();
    CHECK(errors == 1);
    CHECK(seen == asio::error::broken_pipe);
    CHECK(w.pending() == 0);
}

TEST_CASE("pipe_writer: destroyed with a write in flight, it reports nothing") {
    std::signal(SIGPIPE, SIG_IGN);
    asio::io_context io;
    pipe_pair p;
    asio::posix::stream_descriptor out(io, p.write_end);
    int errors = 0;
    {
        auto w =
            std::make_unique<pipe_writer>(out, 1 << 26, [&](const std::error_code&) { ++errors; });
        // More than a pipe holds (64 KiB by default): the write stays in flight.
        REQUIRE(w->write(std::string(1 << 20, 'x')));
        io.poll();
        CHECK(w->pending() == std::size_t{1} << 20);
    }
    ::close(p.read_end); // the write in flight now fails: nobody is told
    p.read_end = -1;
    io.run();
    CHECK(errors == 0);
}

} // namespace unit_pipe_writer_test
