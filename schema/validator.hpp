// schema_validator: checks tool arguments against a tool's inputSchema (JSON Schema draft 7
// and earlier, via valijson). Compiled once per tool at registration; `validate` is const and
// reentrant. Schemas that accept every object (`{"type":"object"}` with nothing else that
// constrains) compile to "no validator" so the common case costs nothing.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

namespace meith::schema {

class schema_validator {
  public:
    struct compiled;
    /// Result of `compile`: `error` when the schema itself is invalid; otherwise `validator`,
    /// which is null when the schema accepts every object.
    struct compile_result {
        std::shared_ptr<const schema_validator> validator;
        std::optional<std::string> error;
    };
    static compile_result compile(std::string_view schema_json);

    /// nullopt when `args` conforms; else a message naming up to three violations in words a
    /// caller can act on, e.g. "arguments do not match the tool's inputSchema: /n must be at
    /// least 0 (got -1); missing required property 'path'". Values and names from `args` are
    /// quoted cut to 60 bytes. Only a failed validation does the extra work of explaining.
    /// `head` begins the message (a host's config is checked with its own words).
    /// A schema of the common flat shape (an object of primitive-typed properties, some
    /// required) accepts plainly valid arguments without valijson (about 1 µs and a dozen
    /// allocations a call less); everything else, and every failure, goes to valijson.
    std::optional<std::string>
    validate(simdjson::dom::element args,
             std::string_view head = "arguments do not match the tool's inputSchema") const;
    /// As validate, always through valijson: what the flat shape is held to (tests, fuzzer).
    std::optional<std::string>
    validate_fully(simdjson::dom::element args,
                   std::string_view head = "arguments do not match the tool's inputSchema") const;
    /// Whether the schema has the flat shape validate checks first.
    bool has_flat_shape() const;

    ~schema_validator();
    explicit schema_validator(std::unique_ptr<compiled> c);

  private:
    std::unique_ptr<compiled> compiled_;
};

/// A tool's inputSchema as its calls check it: compiled at the tool's first call when the
/// definition came from its pin (an on-demand source lists dozens of tools at meithd's start,
/// most never called; docs/configuration.md "Starting on demand"), or already compiled when a
/// running source listed it (a schema that does not compile skips that tool at its listing).
/// Shared by a tool's copies; thread-safe; compiles at most once.
class lazy_validator {
  public:
    /// Compiles `schema_json` at the first `validate`.
    explicit lazy_validator(std::string schema_json) : json_(std::move(schema_json)) {}
    /// Already compiled; null accepts every object.
    explicit lazy_validator(std::shared_ptr<const schema_validator> v) {
        std::call_once(once_, [&] { compiled_.validator = std::move(v); });
    }
    /// As schema_validator::validate. A pinned schema that does not compile (a pins file
    /// edited by hand) refuses every call: "the tool's inputSchema cannot be used: …; the tool
    /// takes no calls until its source lists a valid one".
    std::optional<std::string> validate(simdjson::dom::element args) const;

  private:
    std::string json_;
    mutable std::once_flag once_;
    mutable schema_validator::compile_result compiled_;
};

} // namespace meith::schema
