#include "e2e/postgres_server.hpp"

#include <fstream>
#include <pwd.h>
#include <stdexcept>

#include <sys/wait.h>
#include <unistd.h>

namespace meith::test {

namespace {

/// The newest /usr/lib/postgresql/N/bin (Debian's layout), or empty.
fs::path server_bin() {
    fs::path best;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec))
        if (fs::exists(e.path() / "bin" / "initdb") && e.path() > best.parent_path())
            best = e.path() / "bin";
    return best;
}

} // namespace

std::string postgres_server::missing() {
    if (server_bin().empty())
        return "PostgreSQL's server is not installed (Debian: apt install postgresql; "
               "scripts/install-deps does)";
    if (::geteuid() == 0 && ::getpwnam("postgres") == nullptr)
        return "running as root and there is no `postgres` user to run the server as";
    return {};
}

int postgres_server::run(const std::string& program, const std::vector<std::string>& args) const {
    std::vector<std::string> argv;
    if (::geteuid() == 0) argv = {"/usr/sbin/runuser", "-u", "postgres", "--"};
    argv.push_back((server_bin() / program).string());
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (::chdir(dir_.path.c_str()) != 0) ::_exit(126);
        std::vector<char*> v;
        for (auto& a : argv)
            v.push_back(a.data());
        v.push_back(nullptr);
        ::execv(v[0], v.data());
        ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

postgres_server::postgres_server(const std::string& user, const std::string& password)
    : user_(user), password_(password) {
    if (const auto why = missing(); !why.empty()) throw std::runtime_error(why);
    // The server's user must reach its folder: the temporary folder is the test's, opened.
    fs::permissions(dir_.path,
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    const fs::path pw = dir_.path / "password";
    std::ofstream(pw) << password << "\n";
    if (::geteuid() == 0) {
        const passwd* pg = ::getpwnam("postgres");
        if (::chown(dir_.path.c_str(), pg->pw_uid, pg->pw_gid) != 0 ||
            ::chown(pw.c_str(), pg->pw_uid, pg->pw_gid) != 0)
            throw std::runtime_error("cannot give the server's folder to postgres");
    }
    if (run("initdb", {"-D", (dir_.path / "data").string(), "-U", user, "--pwfile", pw.string(),
                       "--auth=scram-sha-256", "--no-sync", "-E", "UTF8"}) != 0)
        throw std::runtime_error("initdb failed");
    port_ = free_tcp_port();
    const std::string options = "-p " + std::to_string(port_) + " -k " + dir_.path.string() +
                                " -c listen_addresses=127.0.0.1 -c fsync=off";
    if (run("pg_ctl", {"-D", (dir_.path / "data").string(), "-o", options, "-l",
                       (dir_.path / "server.log").string(), "-w", "-t", "60", "start"}) != 0)
        throw std::runtime_error("the PostgreSQL server did not start: " +
                                 slurp(dir_.path / "server.log"));
    started_ = true;
}

postgres_server::~postgres_server() {
    if (started_)
        run("pg_ctl", {"-D", (dir_.path / "data").string(), "-m", "immediate", "-w", "stop"});
}

std::string postgres_server::url() const {
    return "postgresql://" + user_ + ":" + password_ + "@127.0.0.1:" + std::to_string(port_) +
           "/postgres";
}

} // namespace meith::test
