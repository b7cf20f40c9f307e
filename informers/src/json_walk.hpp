#pragma once

// Internal to informers and the tests' reference decoder: the JSON field mapping of decode.hpp,
// generic over the DOM that feeds it (json_reader.hpp). A parse step `parse(walker<Record>&,
// std::string_view text) -> bool` parses the text and calls walker::walk<Dom>, or
// walker::malformed when the parser rejects it. The walker reads and checks the JSON; the rules
// that make a record of the fields it reads are record_builder.hpp's (shared with protobuf.cpp).
//
// Only the known members are read, by a recursive descent into the known containers (so at most
// a handful of levels); every other value is skipped unread. Members are visited in document
// order, repeated keys included: a scalar's last copy wins, arrays' elements accumulate.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tec/base/rfc3339.hpp"
#include "tec/informers/decode.hpp"

#include "json_reader.hpp"
#include "record_builder.hpp"

namespace tec::informers::json_walk {

/// A Pod's metadata, spec and status, handed to a pod_builder.
class pod_fields {
public:
  pod_builder& builder() noexcept { return b_; }

  /// A member of metadata other than name and resourceVersion.
  template <class Dom>
  bool metadata(reader<Dom>& r, std::string_view key, const typename Dom::node& v) {
    if (key == "uid") {
      return r.string(key, v, [&](std::string_view s) { b_.uid(s); });
    }
    if (key == "namespace") {
      return r.string(key, v, [&](std::string_view s) { b_.namespace_name(s); });
    }
    if (key == "deletionTimestamp") {
      return r.string(key, v, [&](std::string_view /*set*/) { b_.deleting(); });
    }
    if (key == "generation") {
      return r.template integer<std::int64_t>(key, v, [&](std::int64_t g) { b_.generation(g); });
    }
    if (key == "creationTimestamp") {
      // One that does not parse is ignored, as a condition's lastTransitionTime is.
      return r.string(key, v,
                      [&](std::string_view s) { b_.created(base::parse_rfc3339(s).value_or(0)); });
    }
    if (key == "annotations") {
      return r.object(key, v, [&](std::string_view name, const typename Dom::node& value) {
        return !pod_builder::reads_annotation(name) ||
               r.string(name, value, [&](std::string_view s) { b_.annotation(name, s); });
      });
    }
    if (key == "labels" && b_.keeps_labels()) {
      return r.object(key, v, [&](std::string_view name, const typename Dom::node& value) {
        return r.string("(label)", value, [&](std::string_view s) { b_.label(name, s); });
      });
    }
    if (key == "ownerReferences") {
      return r.array(key, v, [&](const typename Dom::node& e) { return owner_reference(r, e); });
    }
    return true;
  }

  /// The spec member.
  template <class Dom>
  bool spec(reader<Dom>& r, const typename Dom::node& v) {
    return r.object("spec", v, [&](std::string_view key, const typename Dom::node& value) {
      if (key == "nodeName") {
        return r.string(key, value, [&](std::string_view s) { b_.node_name(s); });
      }
      if (key == "tolerations") {
        return r.array(key, value, [&](const typename Dom::node& e) { return toleration(r, e); });
      }
      return true;
    });
  }

  /// The status member when it is an object.
  template <class Dom>
  bool status(reader<Dom>& r, const typename Dom::node& v) {
    return r.object("status", v, [&](std::string_view key, const typename Dom::node& value) {
      if (key == "phase") {
        return r.string(key, value, [&](std::string_view s) { b_.phase(s); });
      }
      if (key == "conditions") {
        return r.array(key, value, [&](const typename Dom::node& e) { return condition(r, e); });
      }
      return true;
    });
  }

  /// " (pod namespace/name)" for an error message, once the name is read.
  [[nodiscard]] std::string subject() const {
    const auto& pod = b_.record().pod;
    return pod.name.empty() ? "" : " (pod " + clip(pod.namespace_) + "/" + clip(pod.name) + ")";
  }

private:
  template <class Dom>
  bool owner_reference(reader<Dom>& r, const typename Dom::node& e) {
    std::string_view kind;
    bool controller = false;
    if (!Dom::each_member(e, [&](std::string_view key, const typename Dom::node& v) {
          if (key == "kind") {
            return r.string(key, v, [&](std::string_view s) { kind = s; });
          }
          return key != "controller" || r.boolean(key, v, controller);
        })) {
      return false;
    }
    b_.owner_reference(kind, controller);
    return true;
  }

  template <class Dom>
  bool toleration(reader<Dom>& r, const typename Dom::node& e) {
    toleration_fields t;
    if (!Dom::each_member(e, [&](std::string_view key, const typename Dom::node& v) {
          if (key == "key") {
            return r.string(key, v, [&](std::string_view s) { t.key = s; });
          }
          if (key == "operator") {
            return r.string(key, v, [&](std::string_view s) { t.operator_ = s; });
          }
          if (key == "value") {
            return r.string(key, v, [&](std::string_view s) { t.value = s; });
          }
          if (key == "effect") {
            return r.string(key, v, [&](std::string_view s) { t.effect = s; });
          }
          return key != "tolerationSeconds" ||
                 r.template integer<std::int64_t>(key, v, [&](std::int64_t s) { t.seconds = s; });
        })) {
      return false;
    }
    b_.toleration(t);
    return true;
  }

  // A condition's strings are kept as views into the document: never copied.
  template <class Dom>
  bool condition(reader<Dom>& r, const typename Dom::node& e) {
    condition_fields c;
    if (!Dom::each_member(e, [&](std::string_view key, const typename Dom::node& v) {
          if (key == "type") {
            return r.string(key, v, [&](std::string_view s) { c.type = s; });
          }
          if (key == "status") {
            return r.string(key, v, [&](std::string_view s) { c.status = s; });
          }
          if (key == "reason") {
            return r.string(key, v, [&](std::string_view s) { c.reason = s; });
          }
          if (key == "lastTransitionTime") {
            // Only a bind time is read from it: one that does not parse is ignored rather than
            // costing the pod its place in the cache (the API server validates it anyway).
            return r.string(key, v, [&](std::string_view s) {
              c.last_transition_unix = base::parse_rfc3339(s).value_or(0);
            });
          }
          return key != "message" || r.string(key, v, [&](std::string_view s) { c.message = s; });
        })) {
      return false;
    }
    b_.condition(c);
    return true;
  }

  pod_builder b_;
};

/// A Node's spec (its taints), handed to a node_builder.
class node_fields {
public:
  node_builder& builder() noexcept { return b_; }

  /// A member of metadata other than name and resourceVersion: the annotations the builder
  /// reads.
  template <class Dom>
  bool metadata(reader<Dom>& r, std::string_view key, const typename Dom::node& v) {
    if (key != "annotations") {
      return true;
    }
    return r.object(key, v, [&](std::string_view name, const typename Dom::node& value) {
      return !node_builder::reads_annotation(name) ||
             r.string(name, value, [&](std::string_view s) { b_.annotation(name, s); });
    });
  }

  /// The spec member.
  template <class Dom>
  bool spec(reader<Dom>& r, const typename Dom::node& v) {
    return r.object("spec", v, [&](std::string_view key, const typename Dom::node& value) {
      return key != "taints" ||
             r.array(key, value, [&](const typename Dom::node& e) { return taint(r, e); });
    });
  }

  /// The status member when it is an object: conditions, images, ... nothing we need.
  template <class Dom>
  static bool status(reader<Dom>& /*r*/, const typename Dom::node& /*v*/) {
    return true;
  }

  /// " (node name)" for an error message, once the name is read.
  [[nodiscard]] std::string subject() const {
    const auto& node = b_.record().node;
    return node.name.empty() ? "" : " (node " + clip(node.name) + ")";
  }

private:
  template <class Dom>
  bool taint(reader<Dom>& r, const typename Dom::node& e) {
    taint_fields t;
    if (!Dom::each_member(e, [&](std::string_view key, const typename Dom::node& v) {
          if (key == "key") {
            return r.string(key, v, [&](std::string_view s) { t.key = s; });
          }
          if (key == "value") {
            return r.string(key, v, [&](std::string_view s) { t.value = s; });
          }
          if (key == "effect") {
            return r.string(key, v, [&](std::string_view s) { t.effect = s; });
          }
          return key != "timeAdded" || r.string(key, v, [&](std::string_view s) {
            const auto seconds = base::parse_rfc3339(s);
            if (!seconds) {
              return r.errors().fail_at(key, "not an RFC 3339 time: " + clip(s));
            }
            t.time_added_unix = *seconds;
            return true;
          });
        })) {
      return false;
    }
    b_.taint(t);
    return true;
  }

  node_builder b_;
};

/// What the document is.
enum class mode : std::uint8_t {
  event,   // {"type":..., "object":...}
  list,    // {"metadata":..., "items":[...]}
  object,  // a Pod, a Node, or a metav1.Status
};

/// Walks a parsed document (a watch event, a list or one object) and keeps what it holds: the
/// event's type, the list's metadata and items, the object being read (fields_type's builder),
/// a metav1.Status's fields.
template <class Record>
class walker {
public:
  using fields_type =
      std::conditional_t<std::is_same_v<Record, pod_record>, pod_fields, node_fields>;

  walker(mode m, std::string_view what) : mode_(m), trail_(what) {}

  /// Decodes the document rooted at `root`; false when an error was recorded (take_failure()).
  template <class Dom>
  bool walk(const typename Dom::node& root) {
    const value_kind k = Dom::kind(root);
    if (k != value_kind::object) {
      return trail_.fail(errc::unexpected_shape,
                         "expected a JSON object, got " + std::string(describe(k)));
    }
    reader<Dom> r(trail_);
    if (mode_ == mode::object) {
      saw_object_ = true;
    }
    const bool ok = Dom::each_member(root, [&](std::string_view key, const typename Dom::node& v) {
      switch (mode_) {
        case mode::event:
          return event_member(r, key, v);
        case mode::list:
          return list_member(r, key, v);
        case mode::object:
          break;
      }
      return object_member(r, key, v);
    });
    if (!ok) {
      // The walk ends at the first error: the object being read is the one it is in.
      trail_.append_to_failure(fields_.subject());
    }
    return ok;
  }

  /// Records a malformed-JSON error (the parser rejected the text).
  bool malformed(std::string_view why) {
    return trail_.fail(errc::malformed_json, "malformed JSON: " + std::string(why));
  }

  // --- results ----------------------------------------------------------------------------

  error take_failure() { return trail_.take_failure(); }
  /// The object being read (event and object modes: the document's).
  auto& builder() noexcept { return fields_.builder(); }
  std::vector<Record>& items() noexcept { return items_; }
  api_status& status() noexcept { return status_; }
  /// The event's type (nullopt: absent).
  [[nodiscard]] const std::optional<std::string>& type() const noexcept { return type_; }
  [[nodiscard]] bool saw_object() const noexcept { return saw_object_; }
  std::string& list_resource_version() noexcept { return list_rv_; }
  std::string& continue_token() noexcept { return continue_; }

private:
  template <class Dom>
  bool event_member(reader<Dom>& r, std::string_view key, const typename Dom::node& v) {
    if (key == "type") {
      return r.string(key, v, [&](std::string_view s) { type_ = s; });
    }
    if (key != "object") {
      return true;
    }
    if (Dom::kind(v) == value_kind::object) {
      saw_object_ = true;
      fields_ = fields_type{};
    }
    return r.object(key, v, [&](std::string_view name, const typename Dom::node& value) {
      return object_member(r, name, value);
    });
  }

  template <class Dom>
  bool list_member(reader<Dom>& r, std::string_view key, const typename Dom::node& v) {
    if (key == "items") {
      return r.array(key, v, [&](const typename Dom::node& item) { return list_item(r, item); });
    }
    if (key != "metadata") {
      return true;
    }
    return r.object(key, v, [&](std::string_view name, const typename Dom::node& value) {
      if (name == "resourceVersion") {
        return r.string(name, value, [&](std::string_view s) { list_rv_ = s; });
      }
      return name != "continue" ||
             r.string(name, value, [&](std::string_view s) { continue_ = s; });
    });
  }

  /// An element of items: an object of its own.
  template <class Dom>
  bool list_item(reader<Dom>& r, const typename Dom::node& item) {
    fields_ = fields_type{};
    if (!Dom::each_member(item, [&](std::string_view key, const typename Dom::node& v) {
          return object_member(r, key, v);
        })) {
      return false;
    }
    if (const std::string_view missing = builder().missing(); !missing.empty()) {
      return trail_.fail(errc::unexpected_shape,
                         trail_.path() + "." + std::string(missing) + ": missing");
    }
    items_.push_back(builder().finish());
    fields_ = fields_type{};
    return true;
  }

  /// A member of a Pod, a Node or a metav1.Status.
  template <class Dom>
  bool object_member(reader<Dom>& r, std::string_view key, const typename Dom::node& v) {
    if (key == "metadata") {
      return r.object(key, v, [&](std::string_view name, const typename Dom::node& value) {
        if (name == "name") {
          return r.string(name, value, [&](std::string_view s) { builder().name(s); });
        }
        if (name == "resourceVersion") {
          return r.string(name, value, [&](std::string_view s) { builder().resource_version(s); });
        }
        return fields_.metadata(r, name, value);
      });
    }
    if (key == "spec") {
      return fields_.spec(r, v);
    }
    if (key == "status") {  // a Status's string, or a Pod's or Node's object
      switch (const value_kind k = Dom::kind(v)) {
        case value_kind::null:
          return true;
        case value_kind::string:
          status_.status = Dom::string(v);
          return true;
        case value_kind::object:
          return fields_.status(r, v);
        default:
          return r.type_error(key, "a string or an object", k);
      }
    }
    if (key == "code") {
      return r.template integer<std::int32_t>(key, v, [&](std::int32_t c) { status_.code = c; });
    }
    if (key == "reason") {
      return r.string(key, v, [&](std::string_view s) { status_.reason = s; });
    }
    return key != "message" || r.string(key, v, [&](std::string_view s) { status_.message = s; });
  }

  mode mode_;
  trail trail_;
  fields_type fields_;
  std::vector<Record> items_;
  std::optional<std::string> type_;
  bool saw_object_ = false;
  api_status status_;
  std::string list_rv_;
  std::string continue_;
};

/// One watch event line, parsed by `parse` (see the top of this file), as decode.hpp says.
template <class Record, class Parse>
result<watch_event<Record>> decode_event(std::string_view line, std::string_view what,
                                         Parse&& parse) {
  walker<Record> h(mode::event, what);
  if (!parse(h, line)) {
    return h.take_failure();
  }
  auto bad = [&](const std::string& why) {
    return make_error(errc::unexpected_shape, std::string(what) + ": " + why);
  };
  if (!h.type()) {
    return bad("type: missing");
  }
  const auto type = parse_event_type(*h.type());
  if (!type) {
    return bad("type: unknown watch event type \"" + printable(*h.type(), 64) + "\"");
  }
  watch_event<Record> event;
  event.type = *type;
  if (*type == event_type::error) {
    event.status = std::move(h.status());
    return event;
  }
  if (!h.saw_object()) {
    return bad("object: missing");
  }
  if (*type == event_type::bookmark) {
    if (h.builder().record().resource_version.empty()) {
      return bad("object.metadata.resourceVersion: missing in a BOOKMARK event");
    }
    event.object.resource_version = h.builder().finish().resource_version;
    return event;
  }
  if (const auto missing = h.builder().missing(); !missing.empty()) {
    return bad("object." + std::string(missing) + ": missing");
  }
  event.object = h.builder().finish();
  return event;
}

/// A whole LIST body, parsed by `parse`.
template <class Record, class Parse>
result<list_page<Record>> decode_list(std::string_view body, std::string_view what, Parse&& parse) {
  walker<Record> h(mode::list, what);
  if (!parse(h, body)) {
    return h.take_failure();
  }
  list_page<Record> page;
  page.items = std::move(h.items());
  page.resource_version = std::move(h.list_resource_version());
  page.continue_token = std::move(h.continue_token());
  return page;
}

/// One Pod or Node, parsed by `parse`.
template <class Record, class Parse>
result<Record> decode_object(std::string_view json_text, std::string_view what, Parse&& parse) {
  walker<Record> h(mode::object, what);
  if (!parse(h, json_text)) {
    return h.take_failure();
  }
  if (const auto missing = h.builder().missing(); !missing.empty()) {
    return make_error(errc::unexpected_shape,
                      std::string(what) + ": " + std::string(missing) + ": missing");
  }
  return h.builder().finish();
}

/// A metav1.Status body, parsed by `parse`.
template <class Parse>
result<api_status> decode_status(std::string_view json_text, Parse&& parse) {
  walker<pod_record> h(mode::object, "status");
  if (!parse(h, json_text)) {
    return h.take_failure();
  }
  return std::move(h.status());
}

}  // namespace tec::informers::json_walk
