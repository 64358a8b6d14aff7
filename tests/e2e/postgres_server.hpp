// A private PostgreSQL server for one test: Debian's postgresql package (scripts/install-deps),
// a cluster made by initdb in a temporary folder, listening on 127.0.0.1 at a free port, with
// one superuser that logs in by password (scram-sha-256). Stopped and removed at the end.
#pragma once

#include "e2e/daemon_fixture.hpp"

#include <string>

namespace meith::test {

class postgres_server {
  public:
    /// Starts the server (initdb, then pg_ctl start -w). Run as root, PostgreSQL's own programs
    /// run as the `postgres` user the package made (the server refuses root). Throws with the
    /// server's log when it does not start.
    postgres_server(const std::string& user, const std::string& password);
    ~postgres_server();
    postgres_server(const postgres_server&) = delete;
    postgres_server& operator=(const postgres_server&) = delete;

    /// postgresql://USER:PASSWORD@127.0.0.1:PORT/postgres
    std::string url() const;

    /// Empty when Debian's PostgreSQL server programs are installed, else why the test skips.
    static std::string missing();

  private:
    /// Runs one of PostgreSQL's programs (as `postgres` when we are root); its exit status.
    int run(const std::string& program, const std::vector<std::string>& args) const;

    temp_dir dir_;
    std::string user_, password_;
    int port_ = 0;
    bool started_ = false;
};

} // namespace meith::test
