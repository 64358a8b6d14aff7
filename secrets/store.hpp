// secrets/store: the user's secrets for sources (docs/security.md "Secrets").
//
// `meith secret set NAME` keeps a value here; a source's `env` value or a remote source's
// `headers` value names it as `${secret:NAME}`, and meithd fills it in at each start of the
// source (a one-shot exec tool: each run). The store is one file, HOME/secrets.enc (0600),
// AES-256-GCM under a 256-bit key kept apart from the home (key_path(), 0600 in a 0700
// folder), so a copy of the home (a backup, a synced folder, a support bundle) holds no
// secret in the clear. Tools never read either file: the home is hidden from them, and the
// key's folder is among the credential stores the sandbox hides (docs/protocol.md §15).
// A process of the user outside the sandbox can read both: this is not a keyring.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::secrets {

/// The key's file: $MEITH_SECRETS_KEY when set (an absolute path), else
/// ${XDG_CONFIG_HOME:-$HOME/.config}/meith-keys/secrets.key. Empty when neither gives an
/// absolute path.
std::filesystem::path key_path();
/// The folder key_path() is in (hidden from tools).
std::filesystem::path key_dir();
/// HOME/secrets.enc.
std::filesystem::path store_path(const std::filesystem::path& home);

/// A secret's name: 1-64 letters, digits, '_', '-', '.'.
bool valid_name(std::string_view name);

using secret_map = std::map<std::string, std::string, std::less<>>;

/// Every secret of the store of `home`: empty when there is no store yet. Nullopt, with `why`
/// in words (what is wrong, what to run), when the store or its key cannot be trusted or read,
/// or the key does not open it. Decrypted once per change of either file (a cache keyed by
/// their inode, size and mtime): a one-shot tool's run does not decrypt again. Thread-safe.
std::optional<secret_map> load(const std::filesystem::path& home, std::string& why);

/// Replaces the store of `home` by `all`, written whole (0600, renamed into place), under a
/// fresh nonce. Creates `home` (0700, as meithd does) when it is missing, then the key (and its
/// 0700 folder) when there is none and no store yet.
/// False, with `why`, on failure.
bool save(const std::filesystem::path& home, const secret_map& all, std::string& why);

/// Whether `value` names any secret (`${secret:`).
inline bool has_refs(std::string_view value) {
    return value.find("${secret:") != std::string_view::npos;
}

/// `value` with each `${secret:NAME}` replaced by the secret NAME: from the store, else from
/// the older HOME/secrets/NAME file (0600; one trailing newline dropped). Each value filled
/// in is appended to `used` (for the redactor). Nullopt, with `why` naming the secret and the
/// command that sets it, when one is not there or the store cannot be read.
std::optional<std::string> expand(std::string_view value, const std::filesystem::path& home,
                                  std::vector<std::string>& used, std::string& why);

} // namespace meith::secrets
