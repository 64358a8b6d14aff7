// meith-remote: the stdio <-> Streamable HTTP bridge meithd runs for a remote MCP source
// (remote/bridge.hpp). Not for people: meithd starts it with the source's settings.
//
//   meith-remote --source NAME --url URL [--allow-private-network] [--ca-file PEM]
//                [--connect-timeout-ms N] [--max-message-bytes N]
#include "remote/bridge.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

int main(int argc, char** argv) {
    meith::remote::bridge_options opts;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "meith-remote: %s needs a value\n", argv[i]);
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--source")
            opts.source = value();
        else if (a == "--url")
            opts.url = value();
        else if (a == "--allow-private-network")
            opts.egress.allow_private_network = true;
        else if (a == "--ca-file")
            opts.egress.ca_file = value();
        else if (a == "--connect-timeout-ms")
            opts.connect_timeout = std::chrono::milliseconds(std::stoll(value()));
        else if (a == "--max-message-bytes")
            opts.max_message_bytes = std::stoull(value());
        else {
            std::fprintf(stderr,
                         "meith-remote: unknown option %s (meithd runs this program; see "
                         "docs/protocol.md §18)\n",
                         argv[i]);
            return 2;
        }
    }
    if (opts.url.empty() || opts.source.empty()) {
        std::fprintf(stderr, "meith-remote: --source and --url are required\n");
        return 2;
    }
    std::signal(SIGPIPE, SIG_IGN);
    try {
        asio::io_context io;
        meith::remote::bridge b(io, opts);
        b.start();
        io.run();
        return b.exit_status();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "meith-remote: %s\n", e.what());
        return 1;
    }
}
