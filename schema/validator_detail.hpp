// Internals shared by schema_validator.cpp (compiling and running a tool's inputSchema) and
// schema_messages.cpp (explaining a failed validation). Not part of the registry's interface.
#pragma once

#include "schema/validator.hpp"

#include <nlohmann/json.hpp>
#include <re2/re2.h>
#include <valijson/validation_results.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace meith::schema::detail {

using json = nlohmann::json;

/// A JSON pointer reference token (RFC 6901 §3: "~" as "~0", "/" as "~1").
inline std::string escape_token(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

/// What the rewritten schema's own keywords refer to (by index, as the keyword's value).
struct extras {
    std::vector<std::unique_ptr<RE2>> patterns;
    struct pattern_properties {
        /// regex -> subschema (null: accepts anything); subschemas are owned by the
        /// top-level compile (compile_context::owned), and may be the one that refers to them.
        std::vector<std::pair<std::unique_ptr<RE2>, const schema_validator::compiled*>> patterns;
        std::vector<std::string> named; ///< names in `properties` (not "additional")
        bool additional_allowed = true; ///< additionalProperties is not false
        const schema_validator::compiled* additional = nullptr; ///< its subschema, if any
    };
    std::vector<pattern_properties> pattern_props;
    /// Every subschema of the rewritten document, by the index its guard carries (the guard
    /// names the subschema it runs for, so a failed validation can be explained).
    std::vector<const nlohmann::json*> nodes;
};

/// Which subschemas were applied at given argument paths. Only the second run of a validation
/// that failed records (to explain its errors); the first run pays one pointer test per
/// subschema visit.
struct recorder {
    /// Paths asked about, as valijson's context entries ("[n]", "[0]") without "<root>".
    std::vector<std::vector<std::string>> wanted;
    /// Where the arguments a patternProperties subschema validates sit in the whole.
    std::vector<std::string> prefix;
    struct hit {
        std::size_t wanted; ///< index into `wanted`
        const nlohmann::json* node;
        const extras* x;
    };
    std::vector<hit> hits;
    static constexpr std::size_t max_hits = 512;
    /// The second run's errors; recording ends once it holds `stop_at` of them (0: never).
    const valijson::ValidationResults* top = nullptr;
    std::size_t stop_at = 0;

    void note(const std::vector<std::string>& context, const nlohmann::json* node,
              const extras* x) {
        if (hits.size() >= max_hits) return;
        std::size_t depth = prefix.size();
        for (const auto& part : context)
            depth += part != "<root>";
        for (std::size_t w = 0; w < wanted.size(); ++w) {
            const auto& want = wanted[w];
            if (want.size() != depth) continue;
            std::size_t i = 0;
            bool same = true;
            for (; i < prefix.size() && same; ++i)
                same = prefix[i] == want[i];
            for (const auto& part : context) {
                if (!same) break;
                if (part == "<root>") continue;
                same = part == want[i++];
            }
            if (same) hits.push_back({w, node, x});
        }
    }
};

/// Validates `target` against `c` once more with every subschema's guard recording into `rec`
/// (which subschemas ran at `rec.wanted`'s paths), its errors into `results`; stops early at
/// `rec.stop_at` errors. Never throws for the schema's sake: the guard's budget (`budget`
/// subschema visits) or the early stop ends the run with what was recorded so far.
void validate_recording(const schema_validator::compiled& c, const json& target, std::size_t budget,
                        recorder& rec, valijson::ValidationResults& results);

/// A path as messages show it: "/" for the arguments, else "/a/0/b" (RFC 6901, each name
/// cut and escaped, the whole cut in the middle). `context` is valijson's ("<root>", "[n]").
std::string shown_path(const std::vector<std::string>& context);

/// The message for a validation of `target` that failed with `results`: up to three
/// violations (the echoes of enclosing schemas, "property 'x' failed", only when nothing more
/// specific was found), each in words, e.g. "arguments do not match the tool's inputSchema:
/// /op must be one of "get", "set" (got "nope")". Argument text is quoted cut to 60 bytes.
/// `budget`: the guard's, for the second run; `head` begins the message. Throws only std::bad_alloc
/// and the like.
std::string explain_failure(const schema_validator::compiled& c, const json& target,
                            const valijson::ValidationResults& results, std::size_t budget,
                            std::string_view head);

} // namespace meith::schema::detail
