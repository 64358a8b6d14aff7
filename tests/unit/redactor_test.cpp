// Redactor tests: a table-driven corpus of secret keys, secret value formats and look-alikes
// that must survive, plus the cutting rules and the validity of every summary.
#include "audit/redacting_sink.hpp"
#include "audit/redactor.hpp"
#include "audit/redactor_detail.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include <string>
#include <thread>
#include <vector>

using meith::audit::default_redactor;
using meith::audit::redaction_limits;
using meith::audit::redactor;

namespace unit_redactor_test { // one namespace per file: the tests build as unity batches

namespace {

const std::string redacted = "[REDACTED]";

/// Parses a summary, failing the test if it is not JSON or not under the size limit.
nlohmann::json checked_parse(const std::string& summary, std::size_t limit = 4096) {
    INFO("summary: " << summary);
    CHECK(summary.size() < limit);
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(summary));
    return j;
}

/// r.summarize_json(input), checked against the summary of the parsed value with the text left
/// out: the copy fast path and the simdjson walk must give the same bytes.
std::string summary_of(const redactor& r, const std::string& input) {
    const std::string fast = r.summarize_json(input);
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(input).get(root) == simdjson::SUCCESS) {
        INFO("input: " << input);
        CHECK(fast == r.summarize_element(root));
    }
    return fast;
}

std::string as_json_string(const std::string& s) {
    return nlohmann::json(s).dump();
}

// Realistic fakes, one per format.
const std::string aws_key_id = "AKIAIOSFODNN7EXAMPLE";
const std::string aws_session_key_id = "ASIAY34FZKBOKMUTVV7A";
const std::string aws_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const std::string gh_pat = "ghp_R8bX2kLq9ZtY4mWc7NvP1sD3fG6hJ0aE5uIo";
const std::string gh_oauth = "gho_16C7e42F292c6912E7710c838347Ae178B4a";
const std::string gh_user = "ghu_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa";
const std::string gh_server = "ghs_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz";
const std::string gh_refresh = "ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c";
const std::string gh_fine =
    "github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789abcdefghijklmnopqrstuvwxyzAB";
const std::string gitlab = "glpat-Ab3dEf6hIj9kLm2nOp5q";
const std::string slack_bot = "xoxb-2048213948-4711823409123-AbCdEfGhIjKlMnOpQrStUvWx";
const std::string slack_user = "xoxp-2048213948-2048213948-4711823409123-0f3e5c2a9b7d";
const std::string slack_app = "xapp-1-A0123456789-4711823409123-9f8e7d6c5b4a39281706";
const std::string openai = "sk-4fA9bC2dE7fG1hJ6kL3mN8pQ5rS0tU4vW9xY2zA7bC1dE6f";
const std::string openai_proj = "sk-proj-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0Ef3Hi6Kl9_Zx-Qw";
const std::string anthropic = "sk-ant-api03-Xy7Zq3Lm9Np2Rt5Vw8Ab1Cd4Ef6Gh0Jk_Lm-Np4Qr7StAA";
const std::string google = "AIzaSyD9tSrke72PouQMnMXa7eZSW0jkFMBWY4k";
const std::string stripe_secret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";
const std::string stripe_test = "sk_test_51HqLyjWDarjtT1zdp7dcAbCdEf";
const std::string stripe_restricted = "rk_live_51H8cLqLyjWDarjtT1zdp7dcXy";
const std::string stripe_publishable = "pk_live_51H8cLqTyjWDarjtT1zdp7dcQq";
const std::string jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6"
                        "IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV"
                        "_adQssw5c";
const std::string pem_body = "MIIEowIBAAKCAQEA7bqXkQz9Ls3r1cG0xJ2mTnYh8dVbWqPz4uA6eRf9KcLmN2oPq"
                             "\nR7sT1uV3wX5yZ8aB0cD2eF4gH6iJ8kL0mN2oP4qR6sT8uV0wX2yZ4aB6cD8eF0g=";
const std::string pem =
    "-----BEGIN RSA PRIVATE KEY-----\n" + pem_body + "\n-----END RSA PRIVATE KEY-----";

} // namespace

TEST_CASE("secret-like keys are recognised in any case and separator style", "[redactor]") {
    const auto& r = default_redactor();
    for (const char* key : {"password",
                            "Password",
                            "PASSWORD",
                            "db_password",
                            "passwd",
                            "pwd",
                            "db-pwd",
                            "userPwd",
                            "passphrase",
                            "secret",
                            "client_secret",
                            "client.secret",
                            "token",
                            "access_token",
                            "refresh_token",
                            "id_token",
                            "auth_token",
                            "API-KEY",
                            "api key",
                            "apiKey",
                            "api_key",
                            "x_api_key",
                            "X-Api-Key",
                            "AccessKeyId",
                            "access_key_id",
                            "secret_access_key",
                            "Authorization",
                            "auth",
                            "Auth",
                            "x-auth",
                            "cookie",
                            "Set-Cookie",
                            "credential",
                            "db_credentials",
                            "private key",
                            "private_key",
                            "privateKey",
                            "session",
                            "session_id",
                            "sessionToken",
                            "signature",
                            "jwt",
                            "otp"}) {
        INFO(key);
        CHECK(r.is_secret_key(key));
    }
}

TEST_CASE("harmless keys that look a bit like secret ones are not secret", "[redactor]") {
    const auto& r = default_redactor();
    for (const char* key : {"key",
                            "keys",
                            "path",
                            "author",
                            "authors",
                            "keyboard",
                            "max_tokens",
                            "maxTokens",
                            "tokens",
                            "token_count",
                            "tokens_used",
                            "tokenizer",
                            "input_tokens",
                            "name",
                            "cwd",
                            "PWD",
                            "public_key_fingerprint",
                            "description",
                            "passage",
                            "bypass"}) {
        INFO(key);
        CHECK_FALSE(r.is_secret_key(key));
    }
}

TEST_CASE("values under secret keys are redacted whatever their type", "[redactor]") {
    const auto& r = default_redactor();
    struct key_case {
        const char* input;
        const char* expected;
    };
    const std::vector<key_case> cases = {
        {R"({"Password":"hunter2"})", R"({"Password":"[REDACTED]"})"},
        {R"({"API-KEY":"k-123"})", R"({"API-KEY":"[REDACTED]"})"},
        {R"({"apiKey":"k-123"})", R"({"apiKey":"[REDACTED]"})"},
        {R"({"x_api_key":"k-123"})", R"({"x_api_key":"[REDACTED]"})"},
        {R"({"AccessKeyId":"AKIDEXAMPLE"})", R"({"AccessKeyId":"[REDACTED]"})"},
        {R"({"client.secret":"s3cr3t"})", R"({"client.secret":"[REDACTED]"})"},
        {R"({"Authorization":"Token abc"})", R"({"Authorization":"[REDACTED]"})"},
        {R"({"Set-Cookie":"sid=31d4d96e407aad42"})", R"({"Set-Cookie":"[REDACTED]"})"},
        {R"({"private key":"abc"})", R"({"private key":"[REDACTED]"})"},
        {R"({"sessionToken":"FQoGZXIvYXdzEJr"})", R"({"sessionToken":"[REDACTED]"})"},
        {R"({"db_credentials":{"user":"bob","pass":"x"}})", R"({"db_credentials":"[REDACTED]"})"},
        {R"({"pin_password":1234})", R"({"pin_password":"[REDACTED]"})"},
        {R"({"token":["a","b"]})", R"({"token":"[REDACTED]"})"},
        {R"({"secret":null})", R"({"secret":"[REDACTED]"})"},
        {R"({"auth":true,"user":"bob"})", R"({"auth":"[REDACTED]","user":"bob"})"},
        {R"({"outer":{"inner":{"refresh_token":"r-1"}}})",
         R"({"outer":{"inner":{"refresh_token":"[REDACTED]"}}})"},
        {R"([{"pwd":"x"},{"passwd":"y"}])", R"([{"pwd":"[REDACTED]"},{"passwd":"[REDACTED]"}])"},
    };
    for (const auto& c : cases) {
        INFO(c.input);
        CHECK(summary_of(r, c.input) == c.expected);
    }
}

TEST_CASE("known secret formats in string values are redacted, context kept", "[redactor]") {
    const auto& r = default_redactor();
    struct value_case {
        std::string text;   // the string value
        std::string secret; // must not survive
        std::string kept;   // must survive (context around the secret)
    };
    const std::vector<value_case> cases = {
        {"key id " + aws_key_id + " in us-east-1", aws_key_id, "key id [REDACTED] in us-east-1"},
        {"temporary " + aws_session_key_id, aws_session_key_id, "temporary [REDACTED]"},
        {"aws secret key: " + aws_secret, aws_secret, "aws secret key: [REDACTED]"},
        {"AWS_SECRET_ACCESS_KEY=" + aws_secret, aws_secret, "AWS_SECRET_ACCESS_KEY=[REDACTED]"},
        {"cloned with " + gh_pat, gh_pat, "cloned with [REDACTED]"},
        {"oauth " + gh_oauth, gh_oauth, "oauth [REDACTED]"},
        {"user-to-server " + gh_user, gh_user, "user-to-server [REDACTED]"},
        {"server " + gh_server + ".", gh_server, "server [REDACTED]."},
        {"refresh " + gh_refresh, gh_refresh, "refresh [REDACTED]"},
        {"fine-grained " + gh_fine, gh_fine, "fine-grained [REDACTED]"},
        {"gitlab " + gitlab + " ok", gitlab, "gitlab [REDACTED] ok"},
        {"slack bot " + slack_bot, slack_bot, "slack bot [REDACTED]"},
        {"slack user " + slack_user, slack_user, "slack user [REDACTED]"},
        {"slack app " + slack_app, slack_app, "slack app [REDACTED]"},
        {"openai " + openai, openai, "openai [REDACTED]"},
        {"project key " + openai_proj, openai_proj, "project key [REDACTED]"},
        {"claude " + anthropic, anthropic, "claude [REDACTED]"},
        {"maps " + google + " quota", google, "maps [REDACTED] quota"},
        {"stripe " + stripe_secret, stripe_secret, "stripe [REDACTED]"},
        {"stripe " + stripe_test, stripe_test, "stripe [REDACTED]"},
        {"stripe " + stripe_restricted, stripe_restricted, "stripe [REDACTED]"},
        {"stripe " + stripe_publishable, stripe_publishable, "stripe [REDACTED]"},
        {"id " + jwt + " end", jwt, "id [REDACTED] end"},
        {"key:\n" + pem + "\ndone", pem_body,
         "key:\n-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----\ndone"},
        {"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU truncated",
         "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU", "-----BEGIN OPENSSH PRIVATE KEY-----[REDACTED]"},
        {"Authorization: Bearer abc.def", "abc.def", "Authorization: Bearer [REDACTED]"},
        {"Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==",
         "Authorization: Basic [REDACTED]"},
        {"https://alice:s3cr3tP4ss@db.example.com/x", "s3cr3tP4ss",
         "https://alice:[REDACTED]@db.example.com/x"},
        {"postgres://app:hunter2@localhost:5432/app", "hunter2",
         "postgres://app:[REDACTED]@localhost:5432/app"},
        {"HOME=/home/u\nDB_PASSWORD=hunter2\nSHELL=/bin/sh", "hunter2",
         "HOME=/home/u\nDB_PASSWORD=[REDACTED]\nSHELL=/bin/sh"},
        {"export GITHUB_TOKEN=abc123xyz", "abc123xyz", "export GITHUB_TOKEN=[REDACTED]"},
    };
    for (const auto& c : cases) {
        const std::string input = R"({"text":)" + as_json_string(c.text) + "}";
        const std::string summary = summary_of(r, input);
        INFO("input: " << input << "\nsummary: " << summary);
        const auto j = checked_parse(summary);
        const std::string out = j.at("text").get<std::string>();
        CHECK(out.find(c.secret) == std::string::npos);
        CHECK(out == c.kept);
    }
}

TEST_CASE("look-alikes survive unchanged", "[redactor]") {
    const auto& r = default_redactor();
    const std::vector<std::string> inputs = {
        R"({"text":"The quick brown fox jumps over the lazy dog; see the README for details."})",
        R"({"path":"/home/u/src/token_parser.cpp"})",
        R"({"file":"/home/u/src/secret_santa/README.md","line":12})",
        R"({"url":"https://example.com/docs/api?page=2&sort=asc"})",
        R"({"url":"https://user@example.com/repo.git"})",
        R"({"id":"123e4567-e89b-12d3-a456-426614174000"})",
        R"({"message":"Merge commit 3f786850e387550fdab836ed7e6dc881de23001b into main"})",
        R"({"max_tokens":100,"temperature":0.5})",
        R"({"author":"x","keyboard":"us"})",
        R"({"key":"value","keys":["a","b"]})",
        R"({"tokenizer":"cl100k_base","tokens_used":42})",
        R"({"text":"a basic idea, the bearer of bad news"})",
        R"({"text":"pip install scikit-learn; see sk-learn-tutorial-for-beginners"})",
        R"({"text":"if (token == nullptr) return;"})",
        R"({"env":"PWD=/home/u/project\nLANG=C.UTF-8"})",
        R"({"n":-12,"big":18446744073709551615,"x":1.5e-7,"ok":true,"none":null})",
        R"({"unicode":"Grüße, 日本語 🙂"})",
        R"([])",
        R"({})",
    };
    for (const auto& input : inputs) {
        const std::string summary = summary_of(r, input);
        INFO("input: " << input << "\nsummary: " << summary);
        CHECK(summary.find(redacted) == std::string::npos);
        CHECK(checked_parse(summary) == nlohmann::json::parse(input));
    }
}

TEST_CASE("redact_text handles key=value, key: value and JSON-ish pairs", "[redactor]") {
    const auto& r = default_redactor();
    struct text_case {
        const char* input;
        const char* expected;
    };
    const std::vector<text_case> cases = {
        {"DB_PASSWORD=hunter2", "DB_PASSWORD=[REDACTED]"},
        {"starting with DB_PASSWORD=hunter2 and PORT=5432",
         "starting with DB_PASSWORD=[REDACTED] and PORT=5432"},
        {"Authorization: Bearer abc.def", "Authorization: Bearer [REDACTED]"},
        {"authorization: Bearer x", "authorization: Bearer [REDACTED]"},
        {"api_key: 12345 user: bob", "api_key: [REDACTED] user: bob"},
        {R"(body {"password": "correct horse", "user": "bob"})",
         R"(body {"password": "[REDACTED]", "user": "bob"})"},
        {"GET /cb?code=1&access_token=abc123&state=x",
         "GET /cb?code=1&access_token=[REDACTED]&state=x"},
        {"secret='s p a c e s' rest", "secret='[REDACTED]' rest"},
        {"max_tokens=100 tokens_used=42", "max_tokens=100 tokens_used=42"},
        {"author: bob, path=/tmp/x", "author: bob, path=/tmp/x"},
        {"listening on /run/user/1000/meith.sock", "listening on /run/user/1000/meith.sock"},
        {"", ""},
    };
    for (const auto& c : cases) {
        INFO(c.input);
        CHECK(r.redact_text(c.input) == c.expected);
    }
    CHECK(r.redact_text("token " + gh_pat) == "token [REDACTED]");
    CHECK(r.redact_text("conn " + jwt) == "conn [REDACTED]");
}

TEST_CASE("a secret key among many harmless key=value pairs is still found", "[redactor]") {
    // The key=value rule is skipped for text where no key word occurs at all; keys spelt with
    // separators or camelCase must still reach it.
    const auto& r = default_redactor();
    std::string prose;
    for (int i = 0; i < 100; ++i)
        prose += "step " + std::to_string(i) + ": status=ok, files=42; ";
    CHECK(r.redact_text(prose) == prose);
    for (const std::string pair :
         {"db_Pass-Word=hunter2xyz", "userPw: hunter2xyz", "X.Hub.Signature=hunter2xyz",
          "\"private key\": \"hunter2xyz\"", "OTP=hunter2xyz"}) {
        INFO(pair);
        const auto out = r.redact_text(prose + pair + " " + prose);
        CHECK(out.find("hunter2xyz") == std::string::npos);
        CHECK(out.find(redacted) != std::string::npos);
    }
}

TEST_CASE("long strings are cut after redaction, on a UTF-8 boundary", "[redactor]") {
    const auto& r = default_redactor();
    SECTION("plain long string") {
        const std::string s(1000, 'a');
        const auto j = checked_parse(summary_of(r, R"({"s":")" + s + "\"}"));
        const auto out = j.at("s").get<std::string>();
        CHECK(out.rfind(std::string(256, 'a'), 0) == 0);
        CHECK(out.substr(256) == "\u2026[cut 744 chars]");
    }
    SECTION("multibyte characters are never split") {
        std::string s;
        for (int i = 0; i < 300; ++i)
            s += "\u00e9"; // 2 bytes each
        const auto j = checked_parse(summary_of(r, as_json_string(s)));
        const auto out = j.get<std::string>();
        CHECK(out.substr(0, 512) == s.substr(0, 512));
        CHECK(out.substr(512) == "\u2026[cut 44 chars]");
    }
    SECTION("a secret straddling the cut point is still redacted") {
        const std::string s = std::string(240, 'x') + " " + jwt + " " + pem;
        const auto summary = summary_of(r, as_json_string(s));
        checked_parse(summary);
        CHECK(summary.find("eyJhbGciOiJIUzI1NiIs") == std::string::npos);
        CHECK(summary.find("MIIEowIBAAKCAQEA") == std::string::npos);
        CHECK(summary.find(redacted) != std::string::npos);
    }
}

TEST_CASE("a long string is redacted only as far as it can be kept", "[redactor]") {
    const auto& r = default_redactor();
    SECTION("a secret in the kept part of a 1 MB string is redacted, the count is exact") {
        std::string s = "see " + gh_pat + " then";
        while (s.size() < 1000000)
            s += " \u00e9t\u00e9"; // 5 chars, 7 bytes: spaces make every part a candidate
        const auto out = checked_parse(summary_of(r, as_json_string(s))).get<std::string>();
        CHECK(out.find(gh_pat.substr(0, 12)) == std::string::npos);
        CHECK(out.rfind("see [REDACTED] then", 0) == 0);
        std::size_t chars = 0; // of the redacted text
        const std::string redacted_s = "see [REDACTED] then" + s.substr(gh_pat.size() + 9);
        for (unsigned char c : redacted_s)
            chars += (c & 0xC0) != 0x80;
        CHECK_THAT(out, Catch::EndsWith("[cut " + std::to_string(chars - 256) + " chars]"));
    }
    SECTION("a PEM block that runs past the redacted part shows none of its body") {
        std::string body;
        while (body.size() < 40000)
            body += "MIIEowIBAAKCAQEAq3Z9\n";
        const std::string s =
            "key: -----BEGIN RSA PRIVATE KEY-----\n" + body + "-----END RSA PRIVATE KEY-----\n";
        const auto summary = summary_of(r, as_json_string(s));
        checked_parse(summary);
        CHECK(summary.find("MIIEowIBAAKCAQEA") == std::string::npos);
        CHECK(summary.find(redacted) != std::string::npos);
    }
}

TEST_CASE("long arrays keep 50 items and note the rest", "[redactor]") {
    const auto& r = default_redactor();
    nlohmann::json a = nlohmann::json::array();
    for (int i = 0; i < 200; ++i)
        a.push_back(i);
    const auto j = checked_parse(summary_of(r, a.dump()));
    REQUIRE(j.is_array());
    REQUIRE(j.size() == 51);
    CHECK(j[0] == 0);
    CHECK(j[49] == 49);
    CHECK(j[50] == "[cut 150 more items]");
}

TEST_CASE("nesting deeper than 6 levels is cut", "[redactor]") {
    const auto& r = default_redactor();
    const std::string deep = R"({"a":[{"b":[{"c":[{"d":1}]}]}]})"; // 7 levels
    const auto j = checked_parse(summary_of(r, deep));
    CHECK(j["a"][0]["b"][0]["c"][0] == "[cut: depth > 6]");
    const std::string six = R"({"a":[{"b":[{"c":[1]}]}]})"; // exactly 6 levels
    CHECK(checked_parse(summary_of(r, six)) == nlohmann::json::parse(six));
}

TEST_CASE("summaries stay valid JSON under the byte budget", "[redactor]") {
    const auto& r = default_redactor();
    SECTION("huge flat object") {
        nlohmann::json o;
        for (int i = 0; i < 500; ++i)
            o["field_" + std::to_string(i)] = std::string(100, 'v');
        const auto summary = summary_of(r, o.dump());
        const auto j = checked_parse(summary);
        CHECK(summary.size() > 3000); // the budget is used, not wasted
        CHECK(j.at("\u2026") == "[cut: summary over 4096 bytes]");
        CHECK(j.at("field_0") == std::string(100, 'v'));
    }
    SECTION("huge nested structures") {
        nlohmann::json o;
        for (int i = 0; i < 20; ++i)
            for (int k = 0; k < 40; ++k)
                o["group" + std::to_string(i)]["items"].push_back(
                    {{"name", std::string(50, 'n')}, {"ctl", "\x01\x02\x03\x04\x05"}});
        const auto summary = summary_of(r, o.dump());
        checked_parse(summary);
        CHECK(summary.find("[cut: summary over 4096 bytes]") != std::string::npos);
    }
    SECTION("escaping-heavy strings") {
        nlohmann::json a = nlohmann::json::array();
        for (int i = 0; i < 50; ++i)
            a.push_back(std::string(256, '\x01'));
        checked_parse(summary_of(r, a.dump()));
    }
    SECTION("every cut point of a big document yields valid JSON under small budgets") {
        nlohmann::json o;
        for (int i = 0; i < 30; ++i)
            o["k" + std::to_string(i)] = {{"a", {1, 2, {{"b", "text"}}}}};
        for (std::size_t limit = 64; limit < 700; limit += 7) {
            redaction_limits limits;
            limits.max_summary_bytes = limit;
            const redactor small(limits);
            checked_parse(summary_of(small, o.dump()), limit);
        }
    }
}

TEST_CASE("copied and walked summaries agree at every limit of the copy path", "[redactor]") {
    // The copy path (text no rule changes) must give the bytes the simdjson walk gives; each
    // input sits just inside or just outside one of its limits.
    const auto& r = default_redactor();
    const auto nest = [](int levels) {
        std::string open, close;
        for (int i = 0; i < levels; ++i) {
            open += R"({"a":)";
            close += "}";
        }
        return open + "1" + close;
    };
    const auto items = [](int n) {
        std::string a = "[";
        for (int i = 0; i < n; ++i)
            a += (i ? ",\"x\"" : "\"x\"");
        return a + "]";
    };
    const std::vector<std::string> inputs = {
        R"({"s":")" + std::string(256, 'x') + R"("})",
        R"({"s":")" + std::string(257, 'x') + R"("})",
        R"({")" + std::string(257, 'k') + R"(":1})",
        nest(5),
        nest(6),
        nest(7),
        items(50),
        items(51),
        R"({"n":0,"m":-1,"big":123456789012345678,"bigger":1234567890123456789})",
        R"({"z":-0,"f":1.0,"e":1e2,"E":2E-3,"u":18446744073709551615})",
        R"({"esc":"a\"b","nl":"a\nb","slash":"a\/b","u":"\u0041"})",
        R"({"utf8":"Grüße"})",
        R"({"path":"/home/u/src/file_name.cpp","url":"https://example.com/a-b"})",
        R"({"file_path":"x","max_tokens":5,"password":"y"})",
        R"({"text":"Authorization: Bearer abc.def"})",
        R"({"jwt":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"})",
        " { \"a\" : [ 1 , true , false , null , { } , [ ] ] } ",
        R"({"a":1} x)",
        R"({"a":1,})",
        R"([1,])",
        R"({"a" 1})",
        R"(tru)",
        R"(nul)",
        "01",
        "-",
        R"("plain")",
        "true",
        "null",
        "42",
        "[]",
        "{}",
        R"({"a":{"b":{"c":["d",{"e":"f"}]}},"g":[[[]]]})",
        R"({"dup":1,"dup":2})",
        "[" + std::string(5000, ' ') + "]",
        R"({"big":")" + std::string(250, 'x') + R"(","list":)" + items(50) + "}",
    };
    for (const auto& input : inputs)
        summary_of(r, input);
    // Many fields near the byte budget: the copy path stays out, the walk cuts.
    std::string wide = "{";
    for (int i = 0; i < 40; ++i)
        wide += (i ? "," : "") + std::string(R"("k)") + std::to_string(i) + R"(":")" +
                std::string(200, 'v') + "\"";
    wide += "}";
    CHECK(summary_of(r, wide).find("[cut: summary over 4096 bytes]") != std::string::npos);
}

TEST_CASE("invalid JSON becomes a JSON string note", "[redactor]") {
    const auto& r = default_redactor();
    CHECK(summary_of(r, R"({"a":)") == R"("[invalid JSON: 5 bytes]")");
    CHECK(summary_of(r, "") == R"("[invalid JSON: 0 bytes]")");
    CHECK(summary_of(r, "{\"password\": \"hunter2\"") == R"("[invalid JSON: 22 bytes]")");
}

TEST_CASE("a redactor is safe to share between threads", "[redactor]") {
    const auto& r = default_redactor();
    const std::string input = R"({"password":"x","text":"Bearer abc.def","n":[1,2,3]})";
    const std::string expected = r.summarize_json(input);
    std::vector<std::thread> threads;
    std::vector<int> mismatches(4, 0);
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 200; ++i)
                if (r.summarize_json(input) != expected) ++mismatches[static_cast<std::size_t>(t)];
        });
    for (auto& th : threads)
        th.join();
    CHECK(expected == R"({"password":"[REDACTED]","text":"Bearer [REDACTED]","n":[1,2,3]})");
    CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("the redacting sink redacts before the wrapped sink formats", "[redactor]") {
    std::ostringstream out;
    auto inner = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    auto sink = std::make_shared<meith::audit::redacting_sink>(inner);
    spdlog::logger logger("redact-test", sink);
    logger.set_pattern("%l|%v"); // must reach the wrapped sink
    logger.info("connecting with DB_PASSWORD={} to {}", "hunter2", "db.local");
    logger.warn("token {}", gh_pat);
    logger.flush();
    CHECK(out.str() == "info|connecting with DB_PASSWORD=[REDACTED] to db.local\n"
                       "warning|token [REDACTED]\n");
    inner->set_level(spdlog::level::err); // the wrapped sink's level is respected
    logger.info("dropped");
    CHECK(out.str().find("dropped") == std::string::npos);
}

TEST_CASE("key decisions stay right when many keys share the per-thread memory", "[redactor]") {
    // 256 slots, thousands of keys: collisions evict and recompute, never mix answers up.
    const auto& r = meith::audit::default_redactor();
    for (int round = 0; round < 2; ++round)
        for (int i = 0; i < 3000; ++i) {
            const std::string n = std::to_string(i);
            CAPTURE(round, i);
            CHECK(r.is_secret_key("db_password_" + n));
            CHECK(r.is_secret_key("Api-Key" + n));
            CHECK_FALSE(r.is_secret_key("file_name_" + n));
            CHECK_FALSE(r.is_secret_key("max_tokens" + std::string(i % 3, '_')));
        }
    // Keys longer than the memory's slots go through the rules directly.
    CHECK(r.is_secret_key(std::string(60, 'a') + "_secret"));
    CHECK_FALSE(r.is_secret_key(std::string(60, 'a') + "_path"));
}

TEST_CASE("more secret-like keys: pass, passcode, client_key, ssh_key, hmac, key stays readable",
          "[redactor][hardening]") {
    // Issue 11, defect 16.
    const auto& r = default_redactor();
    for (const char* key : {"pass", "db_pass", "userPass", "PASS", "passcode", "user_passcode",
                            "client_key", "clientKey", "ssh_key", "SSH-KEY", "sshKey", "hmac",
                            "hmac_key", "hmacSecret", "HMAC-SHA256"}) {
        INFO(key);
        CHECK(r.is_secret_key(key));
    }
    for (const char* key : {"key", "keys", "passage", "bypass", "compass", "passenger",
                            "primary_key", "sort_key", "hotkey"}) {
        INFO(key);
        CHECK_FALSE(r.is_secret_key(key));
    }
    const std::string s = r.summarize_json(R"({"pass":"hunter2","key":"name","hmac":"abc"})");
    CHECK(s.find("hunter2") == std::string::npos);
    CHECK(s.find("abc") == std::string::npos);
    CHECK(s.find("\"name\"") != std::string::npos);
}

TEST_CASE("a multi-line private key is redacted line by line by the PEM block filter",
          "[redactor][hardening]") {
    // Issue 11, defect 8: stderr is redacted a line at a time, so the key's body lines (plain
    // base64) passed; the filter remembers that it is inside a block.
    meith::audit::pem_block_filter f;
    std::vector<std::string> out;
    for (const char* line :
         {"starting", "-----BEGIN OPENSSH PRIVATE KEY-----",
          "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
          "QyNTUxOQAAACDcm8gJ0Lw5BGQyFkvLHqFo3Wj9V3jRk7LxyXZwAAAAJjAM5fMAzXz",
          "-----END OPENSSH PRIVATE KEY-----", "done"})
        out.emplace_back(f.filter(line));
    REQUIRE(out.size() == 6);
    CHECK(out[0] == "starting");
    CHECK(out[5] == "done");
    for (int i = 1; i <= 4; ++i) {
        INFO(out[i]);
        CHECK(out[i].find("b3BlbnNz") == std::string::npos);
        CHECK(out[i].find("QyNTUx") == std::string::npos);
        CHECK(out[i].find("REDACTED") != std::string::npos);
    }
    // An unterminated block lasts while lines look like PEM (base64 or "Header: value").
    meith::audit::pem_block_filter g;
    CHECK(g.filter("-----BEGIN RSA PRIVATE KEY-----").find("REDACTED") != std::string::npos);
    CHECK(g.filter("Proc-Type: 4,ENCRYPTED").find("ENCRYPTED") == std::string::npos);
    for (int i = 0; i < 200; ++i)
        CHECK(g.filter("MIIEowIBAAKCAQEA+/=").find("MIIE") == std::string::npos);
    CHECK(g.filter("listening on port 8080") == "listening on port 8080");
    CHECK(g.filter("MIIEowIBAAKCAQEA") == "MIIEowIBAAKCAQEA"); // outside a block: kept
}

TEST_CASE("a key cut short and then another: the second block is redacted too",
          "[redactor][hardening]") {
    // Found by tests/fuzz/fuzz_redactor: the line that ended an unterminated block was shown
    // as is even when it began the next block, whose body then passed unredacted.
    meith::audit::pem_block_filter f;
    CHECK(f.filter("-----BEGIN RSA PRIVATE KEY-----").find("REDACTED") != std::string::npos);
    CHECK(f.filter("MIIEowIBAAKCAQEA7bqX").find("MIIE") == std::string::npos);
    CHECK(f.filter("-----BEGIN OPENSSH PRIVATE KEY-----").find("REDACTED") != std::string::npos);
    CHECK(f.filter("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ").find("b3Bl") == std::string::npos);
    CHECK(f.filter("-----END OPENSSH PRIVATE KEY-----").find("REDACTED") != std::string::npos);
    CHECK(f.filter("done") == "done");
}

TEST_CASE("short strings skip the rules only where no rule can match them", "[redactor]") {
    // The prefilter lets strings under 15 bytes without ':', '=', space or tab skip the
    // automaton. The shortest matches of each kind must still be redacted.
    const auto& r = default_redactor();
    CHECK(r.redact_text("xoxb-1234567890") == "[REDACTED]"); // 15 bytes: a token alone
    CHECK(r.redact_text("xapp-1234567890") == "[REDACTED]");
    CHECK(r.redact_text("pw=hunter2") == "pw=[REDACTED]"); // short, with '='
    CHECK(r.redact_text("pwd: hunter2") == "pwd: [REDACTED]");
    CHECK(r.redact_text("x://u:p@h") == "x://u:[REDACTED]@h");
    // Identifiers of every day stay as they are.
    for (const std::string s : {"t_echo", "req-17", "read_file", "xoxb-12345678", "c0-000123"})
        CHECK(r.redact_text(s) == s);
}

TEST_CASE("text skips the automaton unless a token's literal, a rule's word or a secret key "
          "before a separator is there",
          "[redactor]") {
    // may_match decides without RE2: the token rules need their literals ("ghp_", "sk-", …),
    // the auth-scheme and AWS-secret rules their words, the key=value rule a secret key before
    // a separator. Every case is also run through every rule with nothing skipped.
    namespace detail = meith::audit::detail;
    const auto& r = default_redactor();
    for (const std::string s :
         {"Echo: 12:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "the build finished: status=ok, 42 files",
          "tokens=100 maxtokens: 42", "author: bob", R"("user" : "bob")", "\"passw\\ord\": x",
          "a = b = c", "x:y:z=1", ": = :",
          // '-' and '_' without a token's literal: ids, paths, UUIDs
          "mcp_27736_101299:101297", "/home/u/my-project/src_dir/file-name.txt",
          "123e4567-e89b-12d3-a456-426614174000", "ABCDEFGHIJKLMNOPQRS-AKIA_IOSFODNN7EXAMP"}) {
        INFO(s);
        CHECK_FALSE(detail::may_match(s));
        CHECK(detail::redact_by_every_rule(s) == s);
        CHECK(r.redact_text(s) == s);
    }
    struct text_case {
        const char* input;
        const char* expected;
    };
    const std::vector<text_case> caught = {
        {"my.password : hunter2xyz", "my.password : [REDACTED]"},
        {"Echo: token=hunter2xyz", "Echo: token=[REDACTED]"},
        {R"(note "db pass": "hunter2xyz")", R"(note "db pass": "[REDACTED]")"},
        {"note 'api key'\t=\thunter2xyz", "note 'api key'\t=\t[REDACTED]"},
        {"ab:cd:password=hunter2xyz", "ab:cd:password=[REDACTED]"},
        {"authorization: Bearer abc123def", "authorization: Bearer [REDACTED]"},
        {"header: BASIC dXNlcjpwYXNz", "header: BASIC [REDACTED]"},
        // RE2 folds case by Unicode: a long s (U+017F) is an 's' to (?i:basic).
        {"header: ba\u017Fic dXNlcjpwYXNz", "header: ba\u017Fic [REDACTED]"},
        {"aw\u017F key 0123456789abcdefghij0123456789abcdefghij", "aw\u017F key [REDACTED]"},
        {"aws secret key = abcdefghij0123456789ABCDEFGHIJ0123456789",
         "aws secret key = [REDACTED]"},
    };
    // Every token format, alone, is seen by the prefilter.
    for (const auto& token : {aws_key_id,
                              aws_session_key_id,
                              gh_pat,
                              gh_oauth,
                              gh_user,
                              gh_server,
                              gh_refresh,
                              gh_fine,
                              gitlab,
                              slack_bot,
                              slack_user,
                              slack_app,
                              openai,
                              openai_proj,
                              anthropic,
                              google,
                              stripe_secret,
                              stripe_test,
                              stripe_restricted,
                              stripe_publishable,
                              jwt,
                              pem}) {
        INFO(token);
        CHECK(detail::may_match(token));
        CHECK(r.redact_text(token) != token);
    }
    for (const auto& c : caught) {
        INFO(c.input);
        CHECK(detail::may_match(c.input));
        CHECK(r.redact_text(c.input) == c.expected);
        CHECK(detail::redact_by_every_rule(c.input) == c.expected);
    }
}

TEST_CASE("remembered answers for short texts are the right ones, collisions included",
          "[redactor]") {
    // redact() remembers its last answers for short texts in a 64-entry table per thread:
    // 300 texts collide in it, and each must still get its own answer, twice.
    const auto& r = default_redactor();
    std::vector<std::string> texts;
    for (int i = 0; i < 300; ++i)
        texts.push_back(i % 2 ? "pw=hunter" + std::to_string(i)
                              : "a plain note " + std::to_string(i));
    for (int round = 0; round < 2; ++round)
        for (std::size_t k = 0; k < texts.size(); ++k) {
            const std::size_t i = round ? texts.size() - 1 - k : k;
            CAPTURE(texts[i]);
            CHECK(r.redact_text(texts[i]) == (i % 2 ? "pw=[REDACTED]" : texts[i]));
        }
}

TEST_CASE("exact secret values are redacted wherever they occur, short ones are ignored",
          "[redactor]") {
    const std::string secret = "tok_abcdefgh12345";
    meith::audit::add_exact_secret(secret);
    meith::audit::add_exact_secret(secret); // twice: no harm
    const auto& r = default_redactor();

    // As a whole value, under a key that is not secret.
    auto s = summary_of(r, R"({"note":")" + secret + R"(","n":1})");
    CHECK(checked_parse(s) == nlohmann::json::parse(R"({"note":"[REDACTED]","n":1})"));
    CHECK(s.find(secret) == std::string::npos);

    // Inside a longer string, and in an array.
    s = summary_of(r, R"({"msg":"the token is )" + secret + R"( - keep it -","list":["a",")" +
                          secret + R"("]})");
    CHECK(checked_parse(s) ==
          nlohmann::json::parse(
              R"({"msg":"the token is [REDACTED] - keep it -","list":["a","[REDACTED]"]})"));
    CHECK(s.find(secret) == std::string::npos);

    // Twice in one string, and back to back.
    s = summary_of(r, as_json_string(secret + "/" + secret + secret));
    CHECK(checked_parse(s) == "[REDACTED]/[REDACTED][REDACTED]");

    // In a log line.
    const std::string line = "refreshed grant for notes: Authorization uses " + secret + ".";
    const std::string shown = r.redact_text(line);
    CHECK(shown == "refreshed grant for notes: Authorization uses [REDACTED].");
    CHECK(shown.find(secret) == std::string::npos);
    CHECK(r.redact_text(secret) == redacted);

    // Under 8 bytes: ignored (it would redact ordinary words).
    meith::audit::add_exact_secret("abc1234");
    CHECK(r.redact_text("value abc1234 here") == "value abc1234 here");
    CHECK(checked_parse(summary_of(r, R"({"v":"abc1234"})")) ==
          nlohmann::json::parse(R"({"v":"abc1234"})"));
}

} // namespace unit_redactor_test
