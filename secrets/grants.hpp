// grants: where a remote MCP source's OAuth grant is kept (docs/security.md "Remote MCP
// servers: what is stored where"). With a desktop Secret Service on the session bus (and
// MEITH_SECRET_SERVICE not "off"), an item of it named "oauth-grant:SOURCE" with meith's
// attributes (application=meith, meith-home=HOME; secret_service.hpp); otherwise
// HOME/credentials/SOURCE.json, 0600 in a 0700 folder. `meith login` writes a new grant,
// meithd reads it for the source's bridge and writes each refreshed one. A grant still in the
// file while a Secret Service runs is read from there and moved into the service at its next
// write (the file is then removed).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace meith::secrets {

/// A grant as stored: its JSON text (remote/oauth.hpp `credentials`) and where it was found,
/// in words ("the desktop Secret Service" or the file's path).
struct stored_grant {
    std::string text;
    std::string where;
};

/// HOME/credentials/SOURCE.json.
std::filesystem::path grant_file(const std::filesystem::path& home, std::string_view source);

/// The Secret Service item's name for SOURCE's grant: "oauth-grant:SOURCE" (never a valid
/// secret name, so `meith secret list` does not show it).
std::string grant_item_name(std::string_view source);

/// Where a grant of `home` is written now, in words: "the desktop Secret Service" or the
/// file's path.
std::string grant_store(const std::filesystem::path& home, std::string_view source);

/// SOURCE's grant: from the Secret Service when one runs, else (or when it holds none) from the
/// file. Nullopt with `why` empty when there is none; nullopt with `why` when one could not be
/// read (a locked keyring, a file not 0600 of this user, over 1 MiB).
std::optional<stored_grant> load_grant(const std::filesystem::path& home, std::string_view source,
                                       std::string& why);

/// Stores `text` as SOURCE's grant (the Secret Service when one runs, else the file, written
/// whole through a 0600 temporary file and a rename). Returns where, in words; nullopt with
/// `why` when it could not be written.
std::optional<std::string> save_grant(const std::filesystem::path& home, std::string_view source,
                                      std::string_view text, std::string& why);

} // namespace meith::secrets
