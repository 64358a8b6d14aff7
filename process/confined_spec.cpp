#include "process/confined_spec.hpp"

#include "audit/redactor.hpp"
#include "secrets/store.hpp"

#include <algorithm>

namespace meith::process {

process_spec confined_spec(std::string label, const std::vector<std::string>& argv,
                           const std::filesystem::path& cwd,
                           const std::vector<std::string>& env_allow,
                           const std::map<std::string, std::string>& env,
                           const sandbox::confinement* conf) {
    process_spec spec{std::move(label), argv,    cwd, child_environment(env_allow, env),
                      nullptr,          nullptr, {}};
    if (conf) {
        spec.sandbox = conf->plan;
        sandbox::apply_env(*conf, spec.env);
        if (conf->plan && conf->plan->egress_port != 0) spec.egress = conf->egress;
    }
    if (std::any_of(env.begin(), env.end(),
                    [](const auto& kv) { return secrets::has_refs(kv.second); })) {
        // `${secret:NAME}` in the source's env: filled in at each start from the store, each
        // value given to the redactor (docs/security.md "Secrets").
        spec.resolve_env = [](std::vector<std::string>& items) -> std::optional<std::string> {
            for (auto& item : items) {
                if (!secrets::has_refs(item)) continue;
                std::vector<std::string> used;
                std::string why;
                auto filled = secrets::expand(item, sandbox::confinement_home(), used, why);
                if (!filled) return "its env " + item.substr(0, item.find('=')) + ": " + why;
                for (const auto& v : used)
                    audit::add_exact_secret(v);
                item = std::move(*filled);
            }
            return std::nullopt;
        };
    }
    return spec;
}

} // namespace meith::process
