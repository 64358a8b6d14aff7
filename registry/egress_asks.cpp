// egress_asks: a confined process's connection to a target no rule of its source's network
// table decides, when the table says `ask` (docs/protocol.md §19). A person answers it at
// `meith approve`: once (this connection), for the session (this target, for this source, until
// meithd stops or the source's table changes), always (also added to the source's network.allow
// in the config file, by meithd on the person's answer: a tool cannot answer, approvers are
// proven by the secret and a terminal, §14), or deny. No approver connected: refused at once,
// saying what would allow it.
#include "registry/registry.hpp"

#include "egress/rules.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace meith::registry {

void registry::on_egress_ask(tools::tool_source& src, const egress::connection_record& r,
                             tools::call_ptr owner, egress::ask_reply reply) {
    // "host:port", "[v6]:port": the rule naming exactly this target, and the one allow_always
    // writes. Only a rule egress::parse_rule (so the config loader) reads back as this very
    // target is ever offered: a rule it refused would make every later reload, and the next
    // start, fail. (The proxy refuses a malformed host before it asks: this is the backstop.)
    std::string why;
    const auto rule = egress::exact_rule(r.host, r.port, why);
    if (!rule) return reply({false, fmt::format("not offered to a person: {}", why), {}});
    const std::string& target = *rule;
    const std::string source = src.name();
    if (auto it = egress_allowed_.find(source);
        it != egress_allowed_.end() && it->second.contains(target))
        return reply({true, target + " (a person allowed it for this session)", {}});
    if (approvals_.approver_count() == 0)
        return reply({false,
                      fmt::format("no rule names {} and no approver is connected to ask "
                                  "(network.ask): run `meith approve`",
                                  target),
                      fmt::format("add \"{}\" to the source's network.allow", target)});
    // Held as long as the call it belongs to may run; a minute for a connection of no call.
    const std::chrono::milliseconds timeout =
        owner ? std::chrono::milliseconds(owner->timeout_ms) : std::chrono::minutes(1);
    approvals_.hold_egress(
        source, r, owner, timeout,
        [this, source, target, reply = std::move(reply),
         alive = std::weak_ptr<bool>(alive_)](approvals::approval_answer a, std::string reason) {
            if (!alive.lock()) return reply({false, "meithd is stopping", {}});
            switch (a) {
            case approvals::approval_answer::allow_once:
                return reply({true, target + " (a person allowed it once)", {}});
            case approvals::approval_answer::allow_session:
                egress_allowed_[source].insert(target);
                return reply({true, target + " (a person allowed it for this session)", {}});
            case approvals::approval_answer::allow_always: {
                egress_allowed_[source].insert(target);
                std::string how = target + " (a person allowed it always";
                if (!egress_always_) {
                    how += "; no config file to keep it in: for this session";
                } else if (auto error = egress_always_(source, target)) {
                    spdlog::warn("source '{}': {} allowed always, but not written to the "
                                 "config: {}; add it to network.allow by hand",
                                 source, target, *error);
                    how += "; not written to the config: " + *error;
                }
                return reply({true, how + ")", {}});
            }
            case approvals::approval_answer::deny:
                break;
            }
            // A timeout's reason says so itself; a person's is quoted.
            if (reason.starts_with("no approver answered"))
                return reply({false, reason + " (network.ask)",
                              fmt::format("add \"{}\" to the source's network.allow", target)});
            return reply({false,
                          reason.empty() ? "a person refused it at `meith approve`"
                                         : "a person refused it at `meith approve`: " + reason,
                          {}});
        });
}

} // namespace meith::registry
