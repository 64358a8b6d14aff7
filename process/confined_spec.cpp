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
        sandbox::apply_env(*conf, spec.env, env);
        if (conf->plan && conf->plan->egress_port != 0) spec.egress = conf->egress;
    }
    const bool env_refs = std::any_of(env.begin(), env.end(),
                                      [](const auto& kv) { return secrets::has_refs(kv.second); });
    const bool argv_refs = std::any_of(argv.begin() + (argv.empty() ? 0 : 1), argv.end(),
                                       [](const auto& a) { return secrets::has_refs(a); });
    if (env_refs || argv_refs) {
        // `${secret:NAME}` in the source's env or arguments: filled in at each start from the
        // store, each value given to the redactor (docs/security.md "Secrets"). The program
        // itself never names one (the config refuses it).
        spec.resolve_secrets = [](std::vector<std::string>& args,
                                  std::vector<std::string>& items) -> std::optional<std::string> {
            const auto fill = [](std::string& item) -> std::optional<std::string> {
                if (!secrets::has_refs(item)) return std::nullopt;
                std::vector<std::string> used;
                std::string why;
                auto filled = secrets::expand(item, sandbox::confinement_home(), used, why);
                if (!filled) return why;
                for (const auto& v : used)
                    audit::add_exact_secret(v);
                item = std::move(*filled);
                return std::nullopt;
            };
            for (std::size_t i = 1; i < args.size(); ++i)
                if (auto why = fill(args[i]))
                    return "its argument " + std::to_string(i) + ": " + *why;
            for (auto& item : items)
                if (auto why = fill(item))
                    return "its env " + item.substr(0, item.find('=')) + ": " + *why;
            return std::nullopt;
        };
    }
    return spec;
}

} // namespace meith::process
