// constraints: the JSON Schema keywords validator.cpp takes over from Debian's valijson 1.0
// (whose std::regex recurses per character and whose uniqueItems compares every pair) — RE2
// `pattern`, `patternProperties` and date `format`s, a hashed `uniqueItems` — and the guard every
// subschema carries, which bounds the work and the stack one validation may use. Internal to
// schema/; validator.cpp rewrites a schema so valijson builds these.
#pragma once

#include "schema/validator_detail.hpp"

#define VALIJSON_USE_EXCEPTIONS 1
#include <nlohmann/json.hpp>
#include <valijson/constraint_builder.hpp>
#include <valijson/constraints/concrete_constraints.hpp>
#include <valijson/internal/adapter.hpp>
#include <valijson/validation_results.hpp>

#include <re2/re2.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace meith::schema::detail {

constexpr std::ptrdiff_t guard_stack_bytes = 1 << 20; ///< stack one validation may use

// ---- the guard: bounded work and stack per validation ------------------------------------

struct guard_state {
    std::size_t visits = 0;
    std::size_t budget = 0;
    const char* stack_base = nullptr;
    recorder* rec = nullptr;
};
inline thread_local guard_state guard;

struct guard_exhausted : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct recording_done : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class guard_constraint final : public valijson::constraints::PolyConstraint {
  public:
    guard_constraint(const nlohmann::json* node, const extras* x) : node_(node), x_(x) {}
    bool validate(const valijson::adapters::Adapter&, const std::vector<std::string>& context,
                  valijson::ValidationResults*) const override {
        if (++guard.visits > guard.budget)
            throw guard_exhausted("the schema needs too much work for these arguments (over " +
                                  std::to_string(guard.budget) + " subschema checks)");
        const char* here = static_cast<const char*>(__builtin_frame_address(0));
        if (guard.stack_base && guard.stack_base - here > guard_stack_bytes)
            throw guard_exhausted("the schema recurses too deeply for these arguments");
        if (recorder* rec = guard.rec) {
            if (rec->stop_at && rec->top->numErrors() >= rec->stop_at)
                throw recording_done("every path asked about has been recorded");
            rec->note(context, node_, x_);
        }
        return true;
    }

  private:
    Constraint* cloneInto(void* p) const override { return new (p) guard_constraint(*this); }
    size_t sizeOf() const override { return sizeof(guard_constraint); }
    const nlohmann::json* node_;
    const extras* x_;
};

// ---- keywords taken from valijson --------------------------------------------------------

class pattern_constraint final : public valijson::constraints::PolyConstraint {
  public:
    explicit pattern_constraint(const RE2* re) : re_(re) {}
    bool validate(const valijson::adapters::Adapter& target,
                  const std::vector<std::string>& context,
                  valijson::ValidationResults* results) const override {
        if (!target.isString()) return true;
        const std::string s = target.getString();
        if (RE2::PartialMatch(s, *re_)) return true;
        if (results)
            results->pushError(context, "Failed to match the pattern '" + re_->pattern() + "'");
        return false;
    }

  private:
    Constraint* cloneInto(void* p) const override { return new (p) pattern_constraint(*this); }
    size_t sizeOf() const override { return sizeof(pattern_constraint); }
    const RE2* re_;
};

/// `format` date, time and date-time as valijson checks them, with RE2; others are ignored.
class format_constraint final : public valijson::constraints::PolyConstraint {
  public:
    explicit format_constraint(std::string format) : format_(std::move(format)) {}
    bool validate(const valijson::adapters::Adapter& target,
                  const std::vector<std::string>& context,
                  valijson::ValidationResults* results) const override {
        if (!target.isString()) return true;
        static const RE2 date("^([0-9]+)-(0[1-9]|1[012])-(0[1-9]|[12][0-9]|3[01])$");
        static const RE2 time("^([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]|60)(\\.[0-9]+)?"
                              "(([Zz])|([\\+|\\-]([01][0-9]|2[0-3]):[0-5][0-9]))$");
        static const RE2 date_time(
            "^([0-9]+)-(0[1-9]|1[012])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):"
            "([0-5][0-9]):([0-5][0-9]|60)(\\.[0-9]+)?(([Zz])|([\\+|\\-]([01][0-9]|2[0-3]):[0-5]"
            "[0-9]))$");
        const RE2* re = format_ == "date"        ? &date
                        : format_ == "time"      ? &time
                        : format_ == "date-time" ? &date_time
                                                 : nullptr;
        if (!re) return true;
        if (RE2::FullMatch(target.getString(), *re)) return true;
        if (results) results->pushError(context, "String is not a valid " + format_);
        return false;
    }

  private:
    Constraint* cloneInto(void* p) const override { return new (p) format_constraint(*this); }
    size_t sizeOf() const override { return sizeof(format_constraint); }
    std::string format_;
};

/// A canonical text of a JSON value, equal for values JSON Schema calls equal (numbers by
/// value, objects by members in any order).
void canonical(const valijson::adapters::Adapter& v, std::string& out) {
    if (v.isNull()) {
        out += 'n';
    } else if (v.isBool()) {
        out += v.getBool() ? 't' : 'f';
    } else if (v.isNumber()) {
        char buf[40];
        const double d = v.getNumber();
        const int n = std::snprintf(buf, sizeof buf, "d%.17g;", d == 0 ? 0.0 : d);
        out.append(buf, static_cast<std::size_t>(n));
    } else if (v.isString()) {
        const std::string s = v.getString();
        out += 's' + std::to_string(s.size()) + ':';
        out += s;
    } else if (v.isArray()) {
        out += '[';
        v.applyToArray([&](const valijson::adapters::Adapter& item) {
            canonical(item, out);
            return true;
        });
        out += ']';
    } else if (v.isObject()) {
        std::vector<std::string> members;
        v.applyToObject([&](const std::string& key, const valijson::adapters::Adapter& value) {
            std::string m = std::to_string(key.size()) + ':' + key;
            canonical(value, m);
            members.push_back(std::move(m));
            return true;
        });
        std::sort(members.begin(), members.end());
        out += '{';
        for (const auto& m : members)
            out += m;
        out += '}';
    }
}

class unique_items_constraint final : public valijson::constraints::PolyConstraint {
  public:
    bool validate(const valijson::adapters::Adapter& target,
                  const std::vector<std::string>& context,
                  valijson::ValidationResults* results) const override {
        if (!target.isArray()) return true;
        std::unordered_map<std::string, std::size_t> seen;
        bool unique = true;
        std::size_t index = 0, first = 0;
        target.applyToArray([&](const valijson::adapters::Adapter& item) {
            std::string key;
            canonical(item, key);
            const auto [at, fresh] = seen.emplace(std::move(key), index);
            unique = fresh;
            if (fresh)
                ++index;
            else
                first = at->second;
            return unique;
        });
        if (!unique && results)
            results->pushError(context, "Elements at indexes #" + std::to_string(first) + " and #" +
                                            std::to_string(index) +
                                            " violate uniqueness constraint.");
        return unique;
    }

  private:
    Constraint* cloneInto(void* p) const override { return new (p) unique_items_constraint(*this); }
    size_t sizeOf() const override { return sizeof(unique_items_constraint); }
};

class pattern_properties_constraint final : public valijson::constraints::PolyConstraint {
  public:
    explicit pattern_properties_constraint(const extras::pattern_properties* pp) : pp_(pp) {}
    bool validate(const valijson::adapters::Adapter& target,
                  const std::vector<std::string>& context,
                  valijson::ValidationResults* results) const override {
        if (!target.isObject()) return true;
        bool ok = true;
        target.applyToObject([&](const std::string& key, const valijson::adapters::Adapter& value) {
            bool matched = false;
            for (const auto& [re, sub] : pp_->patterns) {
                if (!RE2::PartialMatch(key, *re)) continue;
                matched = true;
                if (sub && !check(*sub, key, value, context, results)) ok = false;
            }
            if (!matched &&
                std::find(pp_->named.begin(), pp_->named.end(), key) == pp_->named.end()) {
                if (!pp_->additional_allowed) {
                    ok = false;
                    if (results)
                        results->pushError(context, "Object contains a property that could not be "
                                                    "validated using 'properties' or "
                                                    "'additionalProperties' constraints: '" +
                                                        key + "'.");
                } else if (pp_->additional &&
                           !check(*pp_->additional, key, value, context, results)) {
                    ok = false;
                }
            }
            return ok || results != nullptr;
        });
        return ok;
    }

  private:
    static bool check(const schema_validator::compiled& sub, const std::string& key,
                      const valijson::adapters::Adapter& value,
                      const std::vector<std::string>& context,
                      valijson::ValidationResults* results);
    Constraint* cloneInto(void* p) const override {
        return new (p) pattern_properties_constraint(*this);
    }
    size_t sizeOf() const override { return sizeof(pattern_properties_constraint); }
    const extras::pattern_properties* pp_;
};

/// Builds our constraints from the rewritten keywords (values are indexes into `extras`).
template <class F>
class builder final : public valijson::ConstraintBuilder {
  public:
    explicit builder(F make) : make_(std::move(make)) {}
    valijson::constraints::Constraint*
    make(const valijson::adapters::Adapter& value) const override {
        return make_(value);
    }

  private:
    F make_;
};
template <class F>
valijson::ConstraintBuilder* make_builder(F f) {
    return new builder<F>(std::move(f));
}

} // namespace meith::schema::detail
