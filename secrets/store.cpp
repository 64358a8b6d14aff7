// secrets/store: see store.hpp. File format of HOME/secrets.enc:
//
//   meith-secrets 1\n
//   BASE64(nonce[12] || ciphertext || tag[16])\n
//
// The plaintext is a JSON object {"NAME":"value",...}; the first line is the GCM additional
// data, so a file of another version is refused rather than misread. The key file holds 64
// hex digits.
#include "secrets/store.hpp"

#include "config/paths.hpp"
#include "config/private_file.hpp"
#include "secrets/secret_service.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>

namespace meith::secrets {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view header = "meith-secrets 1";
constexpr std::size_t key_bytes = 32, nonce_bytes = 12, tag_bytes = 16;

std::string to_hex(const unsigned char* p, std::size_t n) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
        out += digits[p[i] >> 4];
        out += digits[p[i] & 15];
    }
    return out;
}

std::optional<std::string> from_hex(std::string_view hex) {
    if (hex.size() % 2 != 0) return std::nullopt;
    std::string out;
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        int v = 0;
        for (char c : hex.substr(i, 2)) {
            v <<= 4;
            if (c >= '0' && c <= '9')
                v |= c - '0';
            else if (c >= 'a' && c <= 'f')
                v |= c - 'a' + 10;
            else
                return std::nullopt;
        }
        out += static_cast<char>(v);
    }
    return out;
}

std::string base64(std::string_view in) {
    std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(in.data()),
                                  static_cast<int>(in.size()));
    out.resize(static_cast<std::size_t>(n));
    return out;
}

std::optional<std::string> unbase64(std::string_view in) {
    if (in.size() % 4 != 0) return std::nullopt;
    std::string out(3 * in.size() / 4 + 1, '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(in.data()),
                                  static_cast<int>(in.size()));
    if (n < 0) return std::nullopt;
    std::size_t pad = 0;
    if (!in.empty() && in.back() == '=') ++pad;
    if (in.size() > 1 && in[in.size() - 2] == '=') ++pad;
    out.resize(static_cast<std::size_t>(n) - pad);
    return out;
}

/// AES-256-GCM of `plain` under `key` with `nonce`, `header` as additional data: the
/// ciphertext followed by the tag.
std::optional<std::string> seal(const std::string& key, const std::string& nonce,
                                std::string_view plain) {
    std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(),
                                                                        EVP_CIPHER_CTX_free);
    std::string out(plain.size() + tag_bytes, '\0');
    int n = 0, m = 0;
    auto* o = reinterpret_cast<unsigned char*>(out.data());
    if (!ctx ||
        EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr,
                           reinterpret_cast<const unsigned char*>(key.data()),
                           reinterpret_cast<const unsigned char*>(nonce.data())) != 1 ||
        EVP_EncryptUpdate(ctx.get(), nullptr, &n,
                          reinterpret_cast<const unsigned char*>(header.data()),
                          static_cast<int>(header.size())) != 1 ||
        EVP_EncryptUpdate(ctx.get(), o, &n, reinterpret_cast<const unsigned char*>(plain.data()),
                          static_cast<int>(plain.size())) != 1 ||
        EVP_EncryptFinal_ex(ctx.get(), o + n, &m) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, tag_bytes, o + plain.size()) != 1)
        return std::nullopt;
    return out;
}

/// The plaintext of `sealed` (ciphertext + tag), or nullopt when the tag does not verify: a
/// wrong key, or a file changed by anyone without it.
std::optional<std::string> open_sealed(const std::string& key, const std::string& nonce,
                                       std::string_view sealed) {
    if (sealed.size() < tag_bytes) return std::nullopt;
    const std::size_t len = sealed.size() - tag_bytes;
    std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(),
                                                                        EVP_CIPHER_CTX_free);
    std::string out(len + 1, '\0');
    std::string tag(sealed.substr(len));
    int n = 0, m = 0;
    auto* o = reinterpret_cast<unsigned char*>(out.data());
    if (!ctx ||
        EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr,
                           reinterpret_cast<const unsigned char*>(key.data()),
                           reinterpret_cast<const unsigned char*>(nonce.data())) != 1 ||
        EVP_DecryptUpdate(ctx.get(), nullptr, &n,
                          reinterpret_cast<const unsigned char*>(header.data()),
                          static_cast<int>(header.size())) != 1 ||
        EVP_DecryptUpdate(ctx.get(), o, &n, reinterpret_cast<const unsigned char*>(sealed.data()),
                          static_cast<int>(len)) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, tag_bytes, tag.data()) != 1 ||
        EVP_DecryptFinal_ex(ctx.get(), o + n, &m) != 1)
        return std::nullopt;
    out.resize(len);
    return out;
}

/// The key, read from key_path() when it is a 0600 file of this user.
std::optional<std::string> read_key(std::string& why, bool& missing) {
    missing = false;
    const fs::path file = key_path();
    if (file.empty()) {
        why = "no place for the secrets key: set HOME (or MEITH_SECRETS_KEY to a file path)";
        return std::nullopt;
    }
    auto r = config::read_private_file(file, 256);
    struct stat st {};
    if (r.st == config::private_file_read::status::missing) {
        missing = true;
        why = fmt::format("the secrets key {} is missing", file.string());
        return std::nullopt;
    }
    if (r.st != config::private_file_read::status::ok || ::stat(file.c_str(), &st) != 0 ||
        (st.st_mode & 077) != 0) {
        why = fmt::format("the secrets key {} is not a 0600 file of this user; chmod 600 it",
                          file.string());
        return std::nullopt;
    }
    std::string_view text = r.text;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
        text.remove_suffix(1);
    auto key = from_hex(text);
    if (!key || key->size() != key_bytes) {
        why = fmt::format("the secrets key {} is not 64 hex digits", file.string());
        return std::nullopt;
    }
    return key;
}

struct file_id {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = -1;
    std::int64_t mtime_ns = 0;
    bool operator==(const file_id&) const = default;
};

file_id id_of(const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return {};
    return {st.st_dev, st.st_ino, st.st_size,
            std::int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

struct cache {
    std::mutex mutex;
    fs::path store, key;
    file_id store_id, key_id;
    secret_map values;
    bool valid = false;
};

cache& the_cache() {
    static cache c;
    return c;
}

} // namespace

fs::path key_path() {
    if (const char* k = std::getenv("MEITH_SECRETS_KEY"); k && fs::path(k).is_absolute())
        return fs::path(k).lexically_normal();
    if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && fs::path(x).is_absolute())
        return fs::path(x) / "meith-keys" / "secrets.key";
    if (const char* h = std::getenv("HOME"); h && fs::path(h).is_absolute())
        return fs::path(h) / ".config" / "meith-keys" / "secrets.key";
    return {};
}

fs::path key_dir() {
    const fs::path k = key_path();
    return k.empty() ? fs::path() : k.parent_path();
}

fs::path store_path(const fs::path& home) {
    return home / "secrets.enc";
}

bool valid_name(std::string_view n) {
    return !n.empty() && n.size() <= 64 && n != "." && n != ".." &&
           std::all_of(n.begin(), n.end(), [](char c) {
               return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' ||
                      c == '.';
           });
}

std::optional<secret_map> load(const fs::path& home, std::string& why) {
    const fs::path store = store_path(home);
    cache& c = the_cache();
    std::lock_guard lock(c.mutex);
    const file_id sid = id_of(store), kid = id_of(key_path());
    if (c.valid && c.store == store && c.key == key_path() && c.store_id == sid && c.key_id == kid)
        return c.values;
    auto r = config::read_private_file(store, 4 << 20);
    if (r.st == config::private_file_read::status::missing) return secret_map{};
    struct stat st {};
    if (r.st != config::private_file_read::status::ok || ::stat(store.c_str(), &st) != 0 ||
        (st.st_mode & 077) != 0) {
        why = fmt::format("the secrets store {} is not a 0600 file of this user; chmod 600 it",
                          store.string());
        return std::nullopt;
    }
    bool missing = false;
    auto key = read_key(why, missing);
    if (!key) {
        if (missing)
            why += fmt::format(", so {} cannot be read: restore the key, or remove the store and "
                               "set each secret again with `meith secret set NAME`",
                               store.string());
        return std::nullopt;
    }
    std::string_view text = r.text;
    const auto nl = text.find('\n');
    std::optional<std::string> blob;
    if (nl != std::string_view::npos && text.substr(0, nl) == header) {
        std::string_view body = text.substr(nl + 1);
        while (!body.empty() && (body.back() == '\n' || body.back() == '\r'))
            body.remove_suffix(1);
        blob = unbase64(body);
    }
    if (!blob || blob->size() < nonce_bytes + tag_bytes) {
        why = fmt::format("{} is not a meith secrets store (version 1)", store.string());
        return std::nullopt;
    }
    auto plain = open_sealed(*key, blob->substr(0, nonce_bytes),
                             std::string_view(*blob).substr(nonce_bytes));
    if (!plain) {
        why = fmt::format("the key {} does not open {} (another key, or the file was changed)",
                          key_path().string(), store.string());
        return std::nullopt;
    }
    secret_map out;
    const auto j = nlohmann::json::parse(*plain, nullptr, false);
    if (!j.is_object()) {
        why = fmt::format("{} holds no secrets object", store.string());
        return std::nullopt;
    }
    for (const auto& [k, v] : j.items())
        if (v.is_string()) out.emplace(k, v.get<std::string>());
    c.store = store;
    c.key = key_path();
    c.store_id = sid;
    c.key_id = kid;
    c.values = out;
    c.valid = true;
    return out;
}

bool save(const fs::path& home, const secret_map& all, std::string& why) {
    // The home first (0700, as meithd makes it): `meith secret set` may come before meithd's
    // first start, and a key made for a store that cannot be written is a key for nothing.
    if (auto bad = config::ensure_private_dir(home, false)) {
        why = *bad;
        return false;
    }
    bool missing = false;
    auto key = read_key(why, missing);
    if (!key && missing) {
        std::error_code ec;
        if (fs::exists(store_path(home), ec)) {
            why += fmt::format(", and {} was sealed with it: restore the key, or remove the store "
                               "and set each secret again",
                               store_path(home).string());
            return false;
        }
        const fs::path file = key_path();
        fs::create_directories(file.parent_path(), ec);
        ::chmod(file.parent_path().c_str(), 0700);
        unsigned char k[key_bytes];
        if (RAND_bytes(k, sizeof k) != 1) {
            why = "no randomness for a new secrets key";
            return false;
        }
        if (!config::write_private_file(file, to_hex(k, sizeof k) + "\n")) {
            why = fmt::format("cannot write the secrets key {}: {}", file.string(),
                              std::strerror(errno));
            return false;
        }
        key = std::string(reinterpret_cast<const char*>(k), sizeof k);
    }
    if (!key) return false;
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : all)
        j[k] = v;
    unsigned char nonce[nonce_bytes];
    if (RAND_bytes(nonce, sizeof nonce) != 1) {
        why = "no randomness for the store's nonce";
        return false;
    }
    const std::string n(reinterpret_cast<const char*>(nonce), sizeof nonce);
    auto sealed = seal(*key, n, j.dump());
    if (!sealed) {
        why = "AES-256-GCM failed";
        return false;
    }
    const std::string text = std::string(header) + "\n" + base64(n + *sealed) + "\n";
    if (!config::write_private_file(store_path(home), text)) {
        why = fmt::format("cannot write {}: {}", store_path(home).string(), std::strerror(errno));
        return false;
    }
    return true;
}

std::optional<std::string> expand(std::string_view value, const fs::path& home,
                                  std::vector<std::string>& used, std::string& why) {
    std::string out;
    std::optional<secret_map> store;
    std::size_t i = 0;
    for (;;) {
        const auto at = value.find("${secret:", i);
        if (at == std::string_view::npos) break;
        const auto end = value.find('}', at);
        if (end == std::string_view::npos) break;
        out.append(value.substr(i, at - i));
        const auto name = value.substr(at + 9, end - at - 9);
        if (!valid_name(name) || home.empty()) {
            why = fmt::format("'{}' is not a secret name (letters, digits, '_', '-', '.')", name);
            return std::nullopt;
        }
        std::string secret;
        std::optional<std::string> from_service;
        if (secret_service::available()) {
            from_service = secret_service::get(home, name, why);
            if (!from_service && !why.empty()) return std::nullopt;
        }
        if (!from_service && !store) {
            store = load(home, why);
            if (!store) return std::nullopt;
        }
        if (from_service) {
            secret = std::move(*from_service);
        } else if (auto it = store->find(name); it != store->end()) {
            secret = it->second;
        } else {
            // Before `meith secret set`: a file per secret (docs/configuration.md).
            const fs::path file = home / "secrets" / std::string(name);
            auto r = config::read_private_file(file, 64 * 1024);
            if (r.st == config::private_file_read::status::missing) {
                why = fmt::format("the secret '{}' is not set: run `meith secret set {}` in a "
                                  "terminal",
                                  name, name);
                return std::nullopt;
            }
            if (r.st != config::private_file_read::status::ok) {
                why = fmt::format("the secret file {} is not a 0600 file of this user; chmod "
                                  "600 it, or move it into the store with `meith secret set {}`",
                                  file.string(), name);
                return std::nullopt;
            }
            secret = std::move(r.text);
            if (!secret.empty() && secret.back() == '\n') secret.pop_back();
            if (!secret.empty() && secret.back() == '\r') secret.pop_back();
        }
        used.push_back(secret);
        out += secret;
        i = end + 1;
    }
    out.append(value.substr(i));
    return out;
}

} // namespace meith::secrets
