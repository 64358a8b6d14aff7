// fuzz_schema: tool input schemas (schema/validator.hpp).
//
// The input is a schema's JSON text and an instance's JSON text separated by the first NUL
// byte (no NUL: the schema text is validated against itself). The schema is compiled (errors
// are fine) and, when it compiles to a validator and the instance is JSON, the instance is
// validated. Invariants: neither throws nor crashes (this target found unbounded recursion
// with {"$ref":"#"} and std::regex patterns, hence the rewrite to RE2 and the guard); a
// failure message says what it is about and stays small (the explaining second run and the
// quoting of argument text are fuzzed too); a schema of the flat shape that validate checks
// without valijson decides as valijson does.
#include "fuzz_common.hpp"

#include "schema/validator.hpp"

#include <string>

using meith::fuzz::check;
using meith::schema::schema_validator;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const auto nul = input.find('\0');
    const std::string_view schema = input.substr(0, nul);
    const std::string_view instance =
        nul == std::string_view::npos ? schema : input.substr(nul + 1);

    schema_validator::compile_result compiled;
    try {
        compiled = schema_validator::compile(schema);
    } catch (...) {
        check(false, "schema_validator::compile threw", schema);
    }
    if (compiled.error) {
        check(!compiled.validator, "a schema error and a validator", schema);
        check(!compiled.error->empty(), "an empty schema error", schema);
        return 0;
    }
    if (!compiled.validator) return 0; // accepts every object

    simdjson::dom::parser parser;
    simdjson::dom::element args;
    if (parser.parse(instance.data(), instance.size()).get(args) != simdjson::SUCCESS) return 0;
    std::optional<std::string> message;
    try {
        message = compiled.validator->validate(args);
    } catch (...) {
        check(false, "schema_validator::validate threw", input);
    }
    // The flat shape's shortcut accepts only what valijson accepts.
    if (compiled.validator->has_flat_shape())
        check(message.has_value() == compiled.validator->validate_fully(args).has_value(),
              "the flat shape and valijson disagree", input);
    if (message) {
        check(message->rfind("arguments ", 0) == 0, "a validation message of another kind",
              *message);
        // Argument text is quoted cut: a message stays small whatever the input.
        check(message->size() < 16 * 1024, "a validation message over 16 KiB", *message);
    }
    return 0;
}
