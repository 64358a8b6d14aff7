// Unit tests for protocol/json_minify: the same text as simdjson::minify, which it replaces on
// the hot path (arguments and results), for every kind of value.
#include "protocol/json_minify.hpp"

#include <catch2/catch.hpp>

#include <string>

namespace unit_json_minify_test { // one namespace per file: the tests build as unity batches

TEST_CASE("append_minified writes what simdjson::minify writes, for every kind of value") {
    const char* inputs[] = {
        R"({"text":"the hot path","n":42})",
        R"( { "a" : [ 1 , -2 , 3.5 , 1e300 , -0.0 , 18446744073709551615 , -9223372036854775808 ] } )",
        R"({"nested":{"deep":[{"x":null},{"y":true},{"z":false}]},"empty":{},"none":[]})",
        R"("a string with \"quotes\", a \\ backslash, a tab\t and \u0001 a control")",
        R"(["unicode: é ☃ 𝄞", "\u00e9\u2603"])",
        R"(0.1)",
        R"(123456789012)",
        R"(null)",
    };
    simdjson::dom::parser parser;
    for (const char* in : inputs) {
        INFO(in);
        simdjson::dom::element e;
        REQUIRE(parser.parse(std::string(in)).get(e) == simdjson::SUCCESS);
        CHECK(meith::protocol::minified(e) == simdjson::minify(e));
        std::string out = "prefix:";
        meith::protocol::append_minified(out, e);
        CHECK(out == "prefix:" + simdjson::minify(e));
    }
}

} // namespace unit_json_minify_test
