// tool_pins: each source's tool definitions pinned on first sight (docs/protocol.md §22), so a
// tool whose definition changes after it was trusted — a "rug pull": a new description that
// tells the model something else, a wider input schema, a readOnlyHint dropped — is held in
// quarantine until a person accepts the change. The pin is a SHA-256 over the tool's name,
// description, input schema, the rest of its descriptor (title, annotations, output schema) and
// its capabilities; the pinned definition is kept beside it so the person sees the diff. Kept in
// HOME/tool-pins.json (0600, written whole). I/O-thread only.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::tools {

struct tool;
struct tool_definition;

class tool_pins {
  public:
    /// The definition pinned (or pending) for one tool, as shown in a diff.
    struct definition {
        std::string hash; ///< hex SHA-256
        std::string description;
        std::string input_schema_json;
        std::string extra_json; ///< the descriptor's other members (title, annotations, …)
        std::string capabilities;
        std::string accepted_at; ///< RFC 3339; empty for a pending definition
        /// How its arguments are passed (`tool::payload_kind`, `payload_format_json`): kept
        /// to list it without its source (definitions_of), outside the hash (a pin of an older
        /// meith has none and matches as before).
        std::string payload_kind;
        std::string payload_format_json;
    };

    /// What the store says about a tool just listed by its source.
    struct verdict {
        bool quarantined = false;
        bool changed = false;  ///< a pin existed and differs (audited as changed)
        bool new_tool = false; ///< no pin existed (pinned now, or held by quarantine_new)
        /// Only its capabilities changed, and they come from the user's config (`config_caps`):
        /// re-pinned, not held; audited as `tool_capabilities_changed`.
        bool capabilities_changed = false;
        std::string old_capabilities, new_capabilities; ///< when capabilities_changed
        std::string old_hash, new_hash;
    };

    /// Loads `file` (a missing file is an empty store). Returns an error in words for a file
    /// that exists but cannot be trusted or read: pins then start empty and are rewritten.
    std::optional<std::string> load(std::filesystem::path file);

    /// Checks `t` (listed by `source`) against its pin: pinned on first sight (or, with
    /// `quarantine_new`, held); a differing definition is held, the pin unchanged. New pins
    /// are written by save_if_changed, once for a whole listing (10,000 tools rewrote the file
    /// 10,000 times, each longer, on the I/O thread).
    /// `config_caps`: the tool's capabilities are the user's own declaration (an MCP source's
    /// `capabilities` table or `trust_annotations`, whose annotations are pinned as the
    /// server's; an exec tool's), not the source's: a change of them alone is applied, not held
    /// (docs/protocol.md §22: quarantine is for what the server changes).
    verdict check(std::string_view source, const tool& t, bool quarantine_new,
                  bool config_caps = false);
    /// Writes the file when check pinned something since the last write (or a write failed:
    /// it stays to be written, the failure logged with the path and errno).
    void save_if_changed();
    /// Whether pins wait to be written (a check pinned something, or the last write failed).
    bool dirty() const { return dirty_; }

    /// A person accepted the definition held for `source`/`remote_name`: it becomes the pin.
    /// False when nothing is held for it.
    bool accept(std::string_view source, std::string_view remote_name);

    /// The accepted definition and the one held, for a diff; nullopt when not held.
    std::optional<std::pair<std::optional<definition>, definition>>
    held(std::string_view source, std::string_view remote_name) const;

    /// The accepted definitions of `source`'s tools, as the source would list them (names as
    /// it knows them, capabilities as pinned, `execution.taskSupport` read off the descriptor's
    /// other members), in name order: what an on-demand source offers before it runs
    /// (docs/configuration.md "Starting on demand"). Empty when none is pinned.
    std::vector<tool_definition> definitions_of(std::string_view source) const;

    /// SHA-256 (hex) of a tool's pinned members.
    static definition definition_of(const tool& t);

  private:
    /// Writes every pin; false (logged, still dirty) when the write failed.
    bool save();
    static std::string key(std::string_view source, std::string_view remote_name);

    std::optional<std::filesystem::path> file_;
    bool dirty_ = false;
    std::map<std::string, definition, std::less<>> pins_;    ///< accepted
    std::map<std::string, definition, std::less<>> pending_; ///< held in quarantine
};

} // namespace meith::tools
