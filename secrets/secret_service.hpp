// secret_service: the desktop's Secret Service (freedesktop.org Secret Service API 0.2, on the
// session bus: GNOME Keyring, KeePassXC, KWallet's bridge) as meith's secrets store, when one
// runs (docs/security.md "Secrets"). Spoken with sd-bus (libsystemd), a "plain" session: the
// value crosses the user's own session bus, as libsecret's clients do without dh-ietf.
//
// meith's items carry the attributes application=meith, meith-home=HOME, name=NAME, so two
// homes of one user keep their own values. A locked collection is not unlocked here (that
// needs the desktop's prompt): it is an error that says so.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::secrets::secret_service {

/// Whether a Secret Service runs on the user's session bus now (org.freedesktop.secrets has
/// an owner; one only activatable is not started). False when MEITH_SECRET_SERVICE=off, and
/// when meith was built without libsystemd.
bool available();

/// The value of secret `name` of `home`: nullopt with `why` empty when it is not there,
/// nullopt with `why` set when the service failed or the item is locked.
std::optional<std::string> get(const std::filesystem::path& home, std::string_view name,
                               std::string& why);

/// Stores (or replaces) secret `name` of `home` in the default collection. False with `why`.
bool set(const std::filesystem::path& home, std::string_view name, std::string_view value,
         std::string& why);

/// Removes secret `name` of `home`; true when there was one. `why` set on failure.
bool remove(const std::filesystem::path& home, std::string_view name, std::string& why);

/// The names of `home`'s secrets there. `why` set on failure (then empty).
std::vector<std::string> names(const std::filesystem::path& home, std::string& why);

} // namespace meith::secrets::secret_service
