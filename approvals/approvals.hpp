// approvals: grants, approvers and held calls (PROTOCOL.md §12, docs/protocol.md §14).
//
// A call the policy asks about (`decision.ask`) is held here and offered to every approver —
// a connection proven by approver_hello (the daemon checks the proof) — as one
// `approval_request` frame; the first `approve` answer wins and the others hear
// `approval_resolved`. `allow_session` also makes a grant for that session, tool and those
// capabilities. A held call keeps its timeout, and its cancel or the client leaving withdraws
// the request. Grants (permissions/grants.hpp) are added and revoked by approvers, counted down
// per use, expired by a timer, dropped with their session, and optionally persisted (0600).
// Everything is audited: approver_connected / approver_rejected (by the daemon),
// approval_request, approval_decision, grant_created, grant_revoked, grant_used,
// grant_expired. I/O-thread only.
#pragma once

#include "audit/audit_trail.hpp"
#include "audit/redactor.hpp"
#include "egress/proxy.hpp"
#include "permissions/grants.hpp"
#include "tools/call.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meith::approvals {

/// An approver's end of the socket: where approval requests and their outcomes go.
class approver {
  public:
    virtual ~approver() = default;
    /// Queues one complete server frame ("\n" included) for the approver.
    virtual void deliver(std::string_view frame) = 0;
    /// The approver connection's session id (audited as who decided).
    virtual const std::string& approver_session() const = 0;
};

/// An approver's answer to one approval_request. `allow_always` answers egress requests only
/// (docs/protocol.md §19): the target joins the source's network.allow in the config file.
enum class approval_answer { allow_once, allow_session, allow_always, deny };

/// "allow_once" | "allow_session" | "allow_always" | "deny" → the answer; nullopt otherwise.
std::optional<approval_answer> approval_answer_from(std::string_view s);
std::string_view to_string(approval_answer a);

/// The members of a grant frame's `grant` object, checked (docs/protocol.md §14).
struct grant_request {
    std::optional<permissions::caller> who;
    std::optional<std::string> session_id;
    std::optional<std::string> tool;
    permissions::capability_set capabilities = 0;
    std::optional<std::uint64_t> uses;
    std::optional<std::uint64_t> expires_in_ms;
};

class approval_service {
  public:
    approval_service(asio::any_io_executor ex, audit::audit_trail& audit,
                     const audit::redactor& redactor);
    ~approval_service();
    approval_service(const approval_service&) = delete;
    approval_service& operator=(const approval_service&) = delete;

    /// Keeps grants without a session in `file` (JSON, mode 0600): loads the ones still live
    /// now (expired ones are audited as such and dropped) and rewrites it on every change.
    /// Returns an error message when the file exists but cannot be read as grants.
    std::optional<std::string> persist_to(std::filesystem::path file);

    // ---- approvers -----------------------------------------------------------------------

    /// The secret an approver_hello must carry (`$MEITH_HOME/approver.secret`, read by the
    /// daemon at start). Until set, no secret matches.
    void set_approver_secret(std::string secret) { secret_ = std::move(secret); }
    /// True when `secret` is the approver secret (compared in constant time).
    bool approver_secret_matches(std::string_view secret) const;

    /// `a` (already proven) starts receiving approval requests, those already held first.
    void add_approver(approver& a);
    /// `a` stops receiving; the calls it was shown stay held for the others or their timeout.
    void remove_approver(approver& a);
    std::size_t approver_count() const { return approvers_.size(); }
    /// Sends `frame` (one frame, newline-terminated) to every approver: news a person may act
    /// on that is no held call (`tool_quarantined`, docs/protocol.md §22).
    void notify_approvers(std::string_view frame) { broadcast(frame); }

    // ---- held calls ----------------------------------------------------------------------

    /// What the registry does once an approver answered (or the call's hold failed).
    using on_answer = std::function<void(approval_answer, std::string reason)>;

    /// Holds `c` (an ask decision, with approvers connected) and offers it to every approver
    /// with `preview`. Returns its approval id; `answered` runs once with the first answer,
    /// never when the call ends first (its cancel, timeout, or the client leaving: the request
    /// is then withdrawn, see `withdraw`).
    std::string hold(const tools::call_ptr& c, std::string_view preview, on_answer answered);

    /// Withdraws a held call that ended some other way: the approvers hear it, it is audited.
    void withdraw(const std::string& approval_id, std::string_view why);

    /// An approver's answer. Returns an error message (the approval is unknown or already
    /// decided) or nullopt when it was taken.
    std::optional<std::string> answer(std::string_view approval_id, approval_answer a,
                                      std::string reason, approver& by);

    /// Holds a connection of source `source`'s egress proxy to `r.host`:`r.port` that no rule
    /// decides (its network table says `ask`, docs/protocol.md §19) and offers it to every
    /// approver as an approval_request of kind "egress". `owner`, the call the connection
    /// belongs to, may be null. `answered` runs exactly once: with the first answer, or with
    /// `deny` and "no approver answered within N s" after `timeout`.
    std::string hold_egress(std::string_view source, const egress::connection_record& r,
                            const tools::call_ptr& owner, std::chrono::milliseconds timeout,
                            on_answer answered);

    std::size_t held_count() const { return held_.size(); }
    /// Whether `approval_id` names a held call (not an egress request).
    bool is_held_call(std::string_view approval_id) const;
    /// The calls held now (still alive), oldest first.
    std::vector<tools::call_ptr> held_calls() const;

    // ---- grants --------------------------------------------------------------------------

    /// Adds a grant made by approver session `by` (or by approval `approval_id`); returns its
    /// id ("g_" + 16 hex digits).
    std::string add_grant(const grant_request& g, std::string_view by,
                          std::string_view approval_id = {});
    /// Revokes grant `id` for approver session `by`; false when there is none.
    bool revoke(std::string_view id, std::string_view by);
    /// The grants as a JSON array; only those that apply to `session` when given.
    std::string grants_json(const std::string* session) const;
    /// A grant covering call `c` whose capabilities not allowed outright are `needed`: its
    /// use is counted and audited, and its id returned; nullopt when none covers the call.
    std::optional<std::string> use_grant(const tools::call& c, permissions::capability_set needed);
    /// Drops the grants bound to `session` (its connection closed).
    void end_session(std::string_view session);

    /// `preview` (a tool host's text) as approvers see it: every value the args summary would
    /// redact (a string of 4 bytes or more under a secret-looking key of `args_json`) replaced
    /// by "[REDACTED]", then the redactor's text rules (docs/security.md).
    std::string redacted_preview(std::string_view preview, std::string_view args_json) const;

  private:
    struct held_call {
        std::string id; ///< the approval id
        std::weak_ptr<tools::call> c;
        std::string frame; ///< the approval_request frame, for approvers that join later
        on_answer answered;
        /// An egress request (hold_egress): no call of its own, a timer of its own.
        std::shared_ptr<asio::steady_timer> egress_timer;
    };

    void broadcast(std::string_view frame);
    void audit_grant_end(const permissions::grant& g, permissions::grant_end why,
                         std::string_view by);
    void append_grant_json(std::string& out, const permissions::grant& g, bool redacted) const;
    void schedule_expiry();
    void expire_now();
    /// Asks for grants.json to be rewritten: once at the end of this I/O turn, however many
    /// grants changed in it (a burst of 8,000 grants rewrote the file 8,000 times, each longer,
    /// on the I/O thread). A rewrite still pending at destruction is done then.
    void save();
    /// Rewrites grants.json now with the grants that outlive a restart.
    void write_grants();

    asio::any_io_executor ex_;
    audit::audit_trail& audit_;
    const audit::redactor& redactor_;
    permissions::grant_store grants_;
    std::vector<approver*> approvers_;
    std::vector<held_call> held_; ///< oldest first (a handful at most: people answer them)
    asio::steady_timer expiry_timer_;
    std::optional<std::filesystem::path> persist_file_;
    bool save_pending_ = false; ///< a write_grants is posted for the end of this turn
    std::string secret_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

} // namespace meith::approvals
