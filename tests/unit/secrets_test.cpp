// Unit tests of secrets/store (docs/security.md "Secrets"): the store meith keeps when no
// desktop Secret Service runs.
#include "secrets/store.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;
namespace secrets = meith::secrets;

namespace unit_secrets_test { // one namespace per file: the tests build as unity batches

namespace {

/// A fresh temporary folder, removed with everything in it at the end.
struct temp_dir {
    temp_dir() {
        std::string tmpl = (fs::temp_directory_path() / "meith-secrets-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    fs::path path;
};

mode_t mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

} // namespace

TEST_CASE("secrets: the first save into a home meithd has not made yet makes it (0700)",
          "[secrets]") {
    temp_dir tmp;
    const fs::path key = tmp.path / "keys" / "secrets.key";
    ::setenv("MEITH_SECRETS_KEY", key.c_str(), 1);
    const fs::path home = tmp.path / "not-yet" / "home";
    REQUIRE_FALSE(fs::exists(home));

    std::string why;
    const bool saved = secrets::save(home, {{"API_TOKEN", "a value of the test's own"}}, why);
    INFO(why);
    CHECK(saved);
    REQUIRE(fs::is_directory(home));
    CHECK(mode_of(home) == 0700);
    CHECK(mode_of(secrets::store_path(home)) == 0600);
    CHECK(fs::exists(key));
    const auto back = secrets::load(home, why);
    INFO(why);
    REQUIRE(back.has_value());
    CHECK(back->at("API_TOKEN") == "a value of the test's own");
    ::unsetenv("MEITH_SECRETS_KEY");
}

} // namespace unit_secrets_test
