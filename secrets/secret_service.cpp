// secret_service: see secret_service.hpp. The calls of the Secret Service API used here
// (https://specifications.freedesktop.org/secret-service-spec/latest/): Service.OpenSession
// ("plain"), Service.SearchItems, Service.ReadAlias ("default"), Collection.CreateItem,
// Item.GetSecret, Item.Delete, and the Item's Attributes property.
#include "secrets/secret_service.hpp"
#include "secrets/store.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#if MEITH_HAVE_SYSTEMD
#include <systemd/sd-bus.h>
#endif

namespace meith::secrets::secret_service {

namespace fs = std::filesystem;

#if MEITH_HAVE_SYSTEMD

namespace {

constexpr const char* service = "org.freedesktop.secrets";
constexpr const char* service_path = "/org/freedesktop/secrets";
constexpr const char* service_iface = "org.freedesktop.Secret.Service";
constexpr std::uint64_t timeout_us = 5'000'000; // a keyring that does not answer in 5 s is down

struct bus_deleter {
    void operator()(sd_bus* b) const { sd_bus_flush_close_unref(b); }
};
struct message_deleter {
    void operator()(sd_bus_message* m) const { sd_bus_message_unref(m); }
};
using bus_ptr = std::unique_ptr<sd_bus, bus_deleter>;
using message_ptr = std::unique_ptr<sd_bus_message, message_deleter>;

/// An sd_bus_error freed at scope exit.
struct bus_error {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    ~bus_error() { sd_bus_error_free(&e); }
    std::string text(int r) const {
        if (e.message) return e.message;
        return std::strerror(-r);
    }
};

/// A connection to the session bus with a Secret Service session open on it.
struct connection {
    bus_ptr bus;
    std::string session; ///< the session's object path
};

std::optional<connection> open_service(std::string& why) {
    sd_bus* raw = nullptr;
    if (int r = sd_bus_open_user(&raw); r < 0) {
        why = fmt::format("no session bus: {}", std::strerror(-r));
        return std::nullopt;
    }
    connection c{bus_ptr(raw), {}};
    bus_error err;
    sd_bus_message* reply = nullptr;
    int r = sd_bus_call_method(c.bus.get(), service, service_path, service_iface, "OpenSession",
                               &err.e, &reply, "sv", "plain", "s", "");
    message_ptr hold(reply);
    const char* path = nullptr;
    if (r < 0 || sd_bus_message_skip(reply, "v") < 0 ||
        sd_bus_message_read(reply, "o", &path) < 0) {
        why = fmt::format("the Secret Service did not open a session: {}", err.text(r));
        return std::nullopt;
    }
    c.session = path;
    return c;
}

/// Service.SearchItems for meith's item `name` of `home` (every item of `home` when `name`
/// is empty): the unlocked items, and whether a matching item is locked.
std::vector<std::string> search(connection& c, const fs::path& home, std::string_view name,
                                bool& locked, std::string& why) {
    std::vector<std::string> out;
    locked = false;
    sd_bus_message* raw = nullptr;
    if (sd_bus_message_new_method_call(c.bus.get(), &raw, service, service_path, service_iface,
                                       "SearchItems") < 0) {
        why = "cannot build a D-Bus call";
        return out;
    }
    message_ptr m(raw);
    const std::string n(name);
    sd_bus_message_open_container(raw, 'a', "{ss}");
    sd_bus_message_append(raw, "{ss}", "application", "meith");
    sd_bus_message_append(raw, "{ss}", "meith-home", home.c_str());
    if (!n.empty()) sd_bus_message_append(raw, "{ss}", "name", n.c_str());
    sd_bus_message_close_container(raw);
    bus_error err;
    sd_bus_message* reply = nullptr;
    const int r = sd_bus_call(c.bus.get(), raw, timeout_us, &err.e, &reply);
    message_ptr hold(reply);
    if (r < 0) {
        why = fmt::format("the Secret Service's SearchItems failed: {}", err.text(r));
        return out;
    }
    for (int which = 0; which < 2; ++which) {
        if (sd_bus_message_enter_container(reply, 'a', "o") < 0) break;
        const char* p = nullptr;
        while (sd_bus_message_read(reply, "o", &p) > 0)
            if (which == 0)
                out.emplace_back(p);
            else
                locked = true;
        sd_bus_message_exit_container(reply);
    }
    return out;
}

std::string locked_why() {
    return "the desktop keyring holding it is locked: unlock it (log in to the desktop), or set "
           "MEITH_SECRET_SERVICE=off to use meith's own store";
}

} // namespace

bool ask_available() {
    sd_bus* raw = nullptr;
    if (sd_bus_open_user(&raw) < 0) return false;
    bus_ptr bus(raw);
    bus_error err;
    sd_bus_message* reply = nullptr;
    const int r =
        sd_bus_call_method(bus.get(), "org.freedesktop.DBus", "/org/freedesktop/DBus",
                           "org.freedesktop.DBus", "NameHasOwner", &err.e, &reply, "s", service);
    message_ptr hold(reply);
    int owned = 0;
    return r >= 0 && sd_bus_message_read(reply, "b", &owned) >= 0 && owned != 0;
}

bool available() {
    if (const char* off = std::getenv("MEITH_SECRET_SERVICE");
        off && std::string_view(off) == "off")
        return false;
    // Asked at most every 10 s: a one-shot tool's run does not pay for a bus round trip.
    static std::mutex mutex;
    static std::chrono::steady_clock::time_point asked{};
    static bool answer = false;
    std::lock_guard lock(mutex);
    const auto now = std::chrono::steady_clock::now();
    if (asked == std::chrono::steady_clock::time_point{} ||
        now - asked > std::chrono::seconds(10)) {
        answer = ask_available();
        asked = now;
    }
    return answer;
}

std::optional<std::string> get(const fs::path& home, std::string_view name, std::string& why) {
    auto c = open_service(why);
    if (!c) return std::nullopt;
    bool locked = false;
    const auto items = search(*c, home, name, locked, why);
    if (!why.empty()) return std::nullopt;
    if (items.empty()) {
        if (locked) why = locked_why();
        return std::nullopt;
    }
    bus_error err;
    sd_bus_message* reply = nullptr;
    const int r = sd_bus_call_method(c->bus.get(), service, items.front().c_str(),
                                     "org.freedesktop.Secret.Item", "GetSecret", &err.e, &reply,
                                     "o", c->session.c_str());
    message_ptr hold(reply);
    const char* session = nullptr;
    const void* params = nullptr;
    const void* value = nullptr;
    std::size_t params_size = 0, value_size = 0;
    if (r < 0 || sd_bus_message_enter_container(reply, 'r', "oayays") < 0 ||
        sd_bus_message_read(reply, "o", &session) < 0 ||
        sd_bus_message_read_array(reply, 'y', &params, &params_size) < 0 ||
        sd_bus_message_read_array(reply, 'y', &value, &value_size) < 0) {
        why = fmt::format("the Secret Service did not give the secret: {}", err.text(r));
        return std::nullopt;
    }
    return std::string(static_cast<const char*>(value), value_size);
}

bool set(const fs::path& home, std::string_view name, std::string_view value, std::string& why) {
    auto c = open_service(why);
    if (!c) return false;
    bus_error alias_err;
    sd_bus_message* alias = nullptr;
    int r = sd_bus_call_method(c->bus.get(), service, service_path, service_iface, "ReadAlias",
                               &alias_err.e, &alias, "s", "default");
    message_ptr hold_alias(alias);
    const char* collection = nullptr;
    if (r < 0 || sd_bus_message_read(alias, "o", &collection) < 0 ||
        std::string_view(collection) == "/") {
        why = "the Secret Service has no default collection (keyring): create one in the "
              "desktop's password manager, or set MEITH_SECRET_SERVICE=off";
        return false;
    }
    sd_bus_message* raw = nullptr;
    if (sd_bus_message_new_method_call(c->bus.get(), &raw, service, collection,
                                       "org.freedesktop.Secret.Collection", "CreateItem") < 0) {
        why = "cannot build a D-Bus call";
        return false;
    }
    message_ptr m(raw);
    const std::string n(name), label = "meith: " + std::string(name);
    sd_bus_message_open_container(raw, 'a', "{sv}");
    sd_bus_message_append(raw, "{sv}", "org.freedesktop.Secret.Item.Label", "s", label.c_str());
    sd_bus_message_open_container(raw, 'e', "sv");
    sd_bus_message_append(raw, "s", "org.freedesktop.Secret.Item.Attributes");
    sd_bus_message_open_container(raw, 'v', "a{ss}");
    sd_bus_message_open_container(raw, 'a', "{ss}");
    sd_bus_message_append(raw, "{ss}", "application", "meith");
    sd_bus_message_append(raw, "{ss}", "meith-home", home.c_str());
    sd_bus_message_append(raw, "{ss}", "name", n.c_str());
    sd_bus_message_close_container(raw);
    sd_bus_message_close_container(raw);
    sd_bus_message_close_container(raw);
    sd_bus_message_close_container(raw);
    sd_bus_message_open_container(raw, 'r', "oayays");
    sd_bus_message_append(raw, "o", c->session.c_str());
    sd_bus_message_append_array(raw, 'y', "", 0);
    sd_bus_message_append_array(raw, 'y', value.data(), value.size());
    sd_bus_message_append(raw, "s", "text/plain");
    sd_bus_message_close_container(raw);
    r = sd_bus_message_append(raw, "b", 1); // replace meith's item of this name
    bus_error err;
    sd_bus_message* reply = nullptr;
    if (r >= 0) r = sd_bus_call(c->bus.get(), raw, timeout_us, &err.e, &reply);
    message_ptr hold(reply);
    const char *item = nullptr, *prompt = nullptr;
    if (r < 0 || sd_bus_message_read(reply, "oo", &item, &prompt) < 0) {
        why = fmt::format("the Secret Service did not store it: {}", err.text(r));
        return false;
    }
    if (std::string_view(item) == "/") {
        why = locked_why();
        return false;
    }
    return true;
}

bool remove(const fs::path& home, std::string_view name, std::string& why) {
    auto c = open_service(why);
    if (!c) return false;
    bool locked = false;
    const auto items = search(*c, home, name, locked, why);
    if (!why.empty()) return false;
    if (items.empty() && locked) {
        why = locked_why();
        return false;
    }
    for (const auto& item : items) {
        bus_error err;
        sd_bus_message* reply = nullptr;
        const int r =
            sd_bus_call_method(c->bus.get(), service, item.c_str(), "org.freedesktop.Secret.Item",
                               "Delete", &err.e, &reply, "");
        message_ptr hold(reply);
        if (r < 0) {
            why = fmt::format("the Secret Service did not remove it: {}", err.text(r));
            return false;
        }
    }
    return !items.empty();
}

std::vector<std::string> names(const fs::path& home, std::string& why) {
    std::vector<std::string> out;
    auto c = open_service(why);
    if (!c) return out;
    bool locked = false;
    const auto items = search(*c, home, {}, locked, why);
    for (const auto& item : items) {
        bus_error err;
        sd_bus_message* reply = nullptr;
        const int r = sd_bus_call_method(c->bus.get(), service, item.c_str(),
                                         "org.freedesktop.DBus.Properties", "Get", &err.e, &reply,
                                         "ss", "org.freedesktop.Secret.Item", "Attributes");
        message_ptr hold(reply);
        if (r < 0 || sd_bus_message_enter_container(reply, 'v', "a{ss}") < 0 ||
            sd_bus_message_enter_container(reply, 'a', "{ss}") < 0)
            continue;
        const char *k = nullptr, *v = nullptr;
        while (sd_bus_message_read(reply, "{ss}", &k, &v) > 0)
            // Secrets only: an OAuth grant's item ("oauth-grant:SOURCE", grants.hpp) is not one.
            if (std::string_view(k) == "name" && valid_name(v)) out.emplace_back(v);
    }
    return out;
}

#else // built without libsystemd: there is no Secret Service to speak to

bool available() {
    return false;
}
std::optional<std::string> get(const fs::path&, std::string_view, std::string&) {
    return std::nullopt;
}
bool set(const fs::path&, std::string_view, std::string_view, std::string& why) {
    why = "meith was built without libsystemd: no Secret Service";
    return false;
}
bool remove(const fs::path&, std::string_view, std::string&) {
    return false;
}
std::vector<std::string> names(const fs::path&, std::string&) {
    return {};
}

#endif

} // namespace meith::secrets::secret_service
