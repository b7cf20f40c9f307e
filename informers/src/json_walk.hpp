#pragma once

// Internal to informers (and its reference decoder, tec_informers_reference): the JSON field
// mapping of decode.hpp, generic over the DOM that feeds it. A DOM view is a struct with
// `node`, `kind(node) -> value_kind`, `boolean`, `integer`, `floating`, `string`,
// `each_member(node, f(key, value) -> bool)` and `each_element(node, f(value) -> bool)`;
// decode.cpp has simdjson's (production), informers/reference/ nlohmann's (the tests' reference).
// A parse step `parse(walker<Record>&, std::string_view text) -> bool` parses the text and calls
// walker::walk<Dom>, or walker::malformed when the parser rejects it.
// The walker reads and checks the JSON; the rules that make a record of the fields it reads are
// record_builder.hpp's, which the protobuf reader (protobuf.cpp) feeds too.

#include <array>
#include <cassert>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tec/base/rfc3339.hpp"
#include "tec/informers/decode.hpp"

#include "record_builder.hpp"

namespace tec::informers::json_walk {

/// What the document is: decides the root frame.
enum class mode : std::uint8_t { event, list, object };

/// The kinds of JSON containers whose content we read. Everything else is skipped.
enum class frame_kind : std::uint8_t {
  event_root,   // {"type":..., "object":...}
  list_root,    // {"metadata":..., "items":[...]}
  list_meta,    // list metadata
  items,        // [object, ...]
  object_root,  // a Pod, a Node, or a metav1.Status
  metadata,
  annotations,
  labels,
  owner_refs,  // [owner_ref, ...]
  owner_ref,
  pod_spec,
  tolerations,  // [toleration, ...]
  toleration,
  pod_status,
  conditions,  // [condition, ...] (pod status)
  condition,
  node_spec,
  taints,  // [taint, ...]
  taint,
};

/// The fields we read; `none` means "skip this value".
enum class field : std::uint8_t {
  none,
  type,
  object,
  metadata,
  items,
  resource_version,
  continue_token,
  spec,
  status,
  code,
  reason,
  message,
  name,
  namespace_,
  uid,
  deletion_timestamp,
  creation_timestamp,
  annotations,
  mirror,
  opt_out,
  labels,
  label,  // one label's value (its key is the member name)
  owner_references,
  kind,
  controller,
  node_name,
  tolerations,
  key,
  operator_,
  value,
  effect,
  toleration_seconds,
  phase,
  taints,
  time_added,
  conditions,
  condition_status,  // a pod condition's "status" (a string, unlike an object's "status")
  last_transition_time,
};

constexpr std::string_view json_name(field f) noexcept {
  switch (f) {
    case field::none:
      return "";
    case field::type:
      return "type";
    case field::object:
      return "object";
    case field::metadata:
      return "metadata";
    case field::items:
      return "items";
    case field::resource_version:
      return "resourceVersion";
    case field::continue_token:
      return "continue";
    case field::spec:
      return "spec";
    case field::status:
      return "status";
    case field::code:
      return "code";
    case field::reason:
      return "reason";
    case field::message:
      return "message";
    case field::name:
      return "name";
    case field::namespace_:
      return "namespace";
    case field::uid:
      return "uid";
    case field::deletion_timestamp:
      return "deletionTimestamp";
    case field::creation_timestamp:
      return "creationTimestamp";
    case field::annotations:
      return "annotations";
    case field::mirror:
      return mirror_annotation;
    case field::opt_out:
      return controller::opt_out_annotation;
    case field::labels:
      return "labels";
    case field::label:
      return "(label)";
    case field::owner_references:
      return "ownerReferences";
    case field::kind:
      return "kind";
    case field::controller:
      return "controller";
    case field::node_name:
      return "nodeName";
    case field::tolerations:
      return "tolerations";
    case field::key:
      return "key";
    case field::operator_:
      return "operator";
    case field::value:
      return "value";
    case field::effect:
      return "effect";
    case field::toleration_seconds:
      return "tolerationSeconds";
    case field::phase:
      return "phase";
    case field::taints:
      return "taints";
    case field::time_added:
      return "timeAdded";
    case field::conditions:
      return "conditions";
    case field::condition_status:
      return "status";
    case field::last_transition_time:
      return "lastTransitionTime";
  }
  return "";
}

/// The JSON type a field must have (null is always accepted as "absent").
enum class shape : std::uint8_t { object, array, string, integer, boolean, string_or_object };

constexpr shape shape_of(field f) noexcept {
  switch (f) {
    case field::object:
    case field::metadata:
    case field::spec:
    case field::annotations:
    case field::labels:
      return shape::object;
    case field::items:
    case field::owner_references:
    case field::tolerations:
    case field::taints:
    case field::conditions:
      return shape::array;
    case field::code:
    case field::toleration_seconds:
      return shape::integer;
    case field::controller:
      return shape::boolean;
    case field::status:
      return shape::string_or_object;
    default:
      return shape::string;
  }
}

constexpr std::string_view describe(shape s) noexcept {
  switch (s) {
    case shape::object:
      return "an object";
    case shape::array:
      return "an array";
    case shape::string:
      return "a string";
    case shape::integer:
      return "an integer";
    case shape::boolean:
      return "a boolean";
    case shape::string_or_object:
      return "a string or an object";
  }
  return "";
}
constexpr frame_kind element_of(frame_kind array) noexcept {
  switch (array) {
    case frame_kind::items:
      return frame_kind::object_root;
    case frame_kind::owner_refs:
      return frame_kind::owner_ref;
    case frame_kind::tolerations:
      return frame_kind::toleration;
    case frame_kind::conditions:
      return frame_kind::condition;
    default:
      return frame_kind::taint;
  }
}

inline constexpr std::size_t max_error_detail = 200;

/// Nesting deeper than this is malformed JSON (simdjson's default maximum depth, which decode.cpp
/// checks; the reference decoder applies the same limit). A Pod or Node follows a fixed schema a
/// few dozen levels deep; nothing the API server sends comes near it.
inline constexpr std::size_t max_json_depth = 1024;

/// The JSON type of a DOM value, as the field mapping distinguishes them.
enum class value_kind : std::uint8_t {
  null,
  boolean,
  signed_integer,    // fits std::int64_t
  unsigned_integer,  // above INT64_MAX, fits std::uint64_t
  floating,          // a fraction or an exponent (or, for nlohmann, an integer beyond 64 bits)
  string,
  array,
  object,
};

/// "got ..." in a type error.
constexpr std::string_view describe(value_kind k) noexcept {
  switch (k) {
    case value_kind::null:
      return "null";
    case value_kind::boolean:
      return "a boolean";
    case value_kind::signed_integer:
    case value_kind::unsigned_integer:
    case value_kind::floating:
      return "a number";
    case value_kind::string:
      return "a string";
    case value_kind::array:
      return "an array";
    case value_kind::object:
      return "an object";
  }
  return "";
}

/// Walks a parsed document along the few paths we need and fills the record(s): a recursive
/// descent into the known containers only (so at most a handful of levels), every other
/// value skipped unread. Members are visited in document order, repeated keys included (a
/// scalar's last copy wins, arrays' elements accumulate), and the first wrong type found in
/// that order is the error.
template <class Record>
class walker {
public:
  static constexpr bool is_pod = std::is_same_v<Record, pod_record>;
  /// What the fields read are handed to (record_builder.hpp).
  using builder_type = std::conditional_t<is_pod, pod_builder, node_builder>;

  walker(mode m, std::string_view what) : mode_(m), what_(what) {}

  /// Decodes the document rooted at `root`; false when an error was recorded (failure()).
  template <class Dom>
  bool walk(const typename Dom::node& root) {
    const value_kind k = Dom::kind(root);
    if (k != value_kind::object) {
      return fail(errc::unexpected_shape,
                  "expected a JSON object, got " + std::string(describe(k)));
    }
    const frame_kind kind = mode_ == mode::event  ? frame_kind::event_root
                            : mode_ == mode::list ? frame_kind::list_root
                                                  : frame_kind::object_root;
    if (kind == frame_kind::object_root) {
      saw_object_ = true;
    }
    return walk_members<Dom>(root, kind);
  }

  /// Records a malformed-JSON error (the parser rejected the text).
  bool malformed(std::string_view why) {
    return fail(errc::malformed_json, "malformed JSON: " + std::string(why));
  }

  // --- results ----------------------------------------------------------------------------

  [[nodiscard]] const std::optional<error>& failure() const noexcept { return error_; }
  error take_failure() { return std::move(*error_); }
  /// The object being read (event and object modes: the document's).
  builder_type& builder() noexcept { return builder_; }
  std::vector<Record>& items() noexcept { return items_; }
  api_status& status() noexcept { return status_; }
  [[nodiscard]] const std::string& type() const noexcept { return type_; }
  [[nodiscard]] bool saw_type() const noexcept { return saw_type_; }
  [[nodiscard]] bool saw_object() const noexcept { return saw_object_; }
  std::string& list_resource_version() noexcept { return list_rv_; }
  std::string& continue_token() noexcept { return continue_; }

private:
  /// One step of the JSON path of the value being read, for error messages.
  struct step {
    std::string_view name;  // a member's name, or empty for an array index
    std::size_t index = 0;
  };

  template <class Dom>
  bool walk_members(const typename Dom::node& object, frame_kind kind) {
    return Dom::each_member(object, [&](std::string_view key, const typename Dom::node& value) {
      const field f = lookup(kind, key);
      member_key_ = key;
      return f == field::none || walk_field<Dom>(kind, f, value);
    });
  }

  /// The value of a known field `f` of a container of kind `parent`.
  template <class Dom>
  bool walk_field(frame_kind parent, field f, const typename Dom::node& value) {
    const value_kind k = Dom::kind(value);
    const shape s = shape_of(f);
    switch (k) {
      case value_kind::null:
        return true;  // null: the field is absent
      case value_kind::object: {
        if (s != shape::object && s != shape::string_or_object) {
          return fail_type(f, describe(k));
        }
        const std::optional<frame_kind> kind = object_frame(parent, f);
        if (!kind) {
          return true;  // nothing we need inside (a node's status)
        }
        if (*kind == frame_kind::object_root) {
          saw_object_ = true;
          builder_ = builder_type{};
        }
        push(json_name(f));
        const bool ok = walk_members<Dom>(value, *kind);
        pop();
        return ok;
      }
      case value_kind::array: {
        if (s != shape::array) {
          return fail_type(f, describe(k));
        }
        push(json_name(f));
        const bool ok = walk_elements<Dom>(value, array_frame(f));
        pop();
        return ok;
      }
      case value_kind::string:
        if (s != shape::string && s != shape::string_or_object) {
          return fail_type(f, describe(k));
        }
        return assign_string(parent, f, Dom::string(value));
      case value_kind::boolean:
        if (f == field::controller && parent == frame_kind::owner_ref) {
          owner_controller_ = Dom::boolean(value);
          return true;
        }
        return fail_type(f, describe(k));
      case value_kind::signed_integer:
        return integer(parent, f, Dom::integer(value));
      case value_kind::unsigned_integer:
        return integer(parent, f, std::nullopt);
      case value_kind::floating:
        if (s == shape::integer) {
          return fail_at(f, "expected an integer, got a floating-point number (" +
                                format_double(Dom::floating(value)) + ")");
        }
        return fail_type(f, describe(k));
    }
    return true;
  }

  /// The elements of a known array; each must be an object of kind element_of(array).
  template <class Dom>
  bool walk_elements(const typename Dom::node& array, frame_kind kind) {
    const frame_kind element = element_of(kind);
    std::size_t index = 0;
    return Dom::each_element(array, [&](const typename Dom::node& value) {
      const value_kind k = Dom::kind(value);
      if (k != value_kind::object) {
        return fail(errc::unexpected_shape, path() + "[" + std::to_string(index) +
                                                "]: expected an object, got " +
                                                std::string(describe(k)));
      }
      push({}, index++);
      start_element(element);
      const bool ok = walk_members<Dom>(value, element) && end_element(element);
      pop();
      return ok;
    });
  }

  void push(std::string_view name, std::size_t index = 0) noexcept {
    // Only known fields are entered, so the depth is bounded by the schema (at most 5).
    assert(depth_ < path_.size());
    path_[depth_++] = step{name, index};
  }

  void pop() noexcept { --depth_; }

  bool integer(frame_kind parent, field f, std::optional<std::int64_t> v) {
    if (f == field::toleration_seconds && parent == frame_kind::toleration) {
      if (!v) {
        return fail_at(f, "integer out of int64 range");
      }
      toleration_.seconds = *v;
      return true;
    }
    if (f == field::code && parent == frame_kind::object_root) {
      if (!v || *v < std::numeric_limits<std::int32_t>::min() ||
          *v > std::numeric_limits<std::int32_t>::max()) {
        return fail_at(f, "integer out of int32 range");
      }
      status_.code = static_cast<std::int32_t>(*v);
      return true;
    }
    return fail_type(f, "a number");
  }

  static std::string format_double(double v) {
    std::array<char, 32> buf{};
    const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    return ec == std::errc{} ? std::string(buf.data(), end) : std::string("?");
  }

  bool assign_string(frame_kind parent, field f, std::string_view v) {
    switch (parent) {
      case frame_kind::event_root:
        type_ = v;
        saw_type_ = true;
        return true;
      case frame_kind::list_meta:
        (f == field::resource_version ? list_rv_ : continue_) = v;
        return true;
      case frame_kind::object_root:
        (f == field::status   ? status_.status
         : f == field::reason ? status_.reason
                              : status_.message) = v;
        return true;
      case frame_kind::metadata:
        return assign_metadata(f, v);
      case frame_kind::annotations:
        if constexpr (is_pod) {
          builder_.annotation(member_key_, v);
        }
        return true;
      case frame_kind::labels:
        if constexpr (is_pod) {
          builder_.label(member_key_, v);
        }
        return true;
      case frame_kind::owner_ref:
        owner_kind_ = v;
        return true;
      case frame_kind::pod_spec:
        if constexpr (is_pod) {
          builder_.node_name(v);
        }
        return true;
      case frame_kind::pod_status:
        if constexpr (is_pod) {
          builder_.phase(v);
        }
        return true;
      case frame_kind::toleration:
        return assign_toleration(f, v);
      case frame_kind::taint:
        return assign_taint(f, v);
      case frame_kind::condition:
        assign_condition(f, v);
        return true;
      default:
        return true;
    }
  }
  // Kept as views into the document: a condition's strings are never copied.
  void assign_condition(field f, std::string_view v) noexcept {
    switch (f) {
      case field::type:
        condition_.type = v;
        break;
      case field::condition_status:
        condition_.status = v;
        break;
      case field::reason:
        condition_.reason = v;
        break;
      case field::message:
        condition_.message = v;
        break;
      case field::last_transition_time:
        // Only a bind time is read from it: one that does not parse is ignored rather than
        // costing the pod its place in the cache (the API server validates it anyway).
        condition_.last_transition_unix = base::parse_rfc3339(v).value_or(0);
        break;
      default:
        break;
    }
  }

  bool assign_metadata(field f, std::string_view v) {
    switch (f) {
      case field::name:
        builder_.name(v);
        break;
      case field::resource_version:
        builder_.resource_version(v);
        break;
      default:
        if constexpr (is_pod) {
          assign_pod_metadata(f, v);
        }
        break;
    }
    return true;
  }

  void assign_pod_metadata(field f, std::string_view v) {
    switch (f) {
      case field::uid:
        builder_.uid(v);
        break;
      case field::namespace_:
        builder_.namespace_name(v);
        break;
      case field::deletion_timestamp:
        builder_.deleting();
        break;
      case field::creation_timestamp:
        // One that does not parse is ignored, as a condition's lastTransitionTime is.
        builder_.created(base::parse_rfc3339(v).value_or(0));
        break;
      default:
        break;
    }
  }

  bool assign_toleration(field f, std::string_view v) noexcept {
    switch (f) {
      case field::key:
        toleration_.key = v;
        break;
      case field::operator_:
        toleration_.operator_ = v;
        break;
      case field::value:
        toleration_.value = v;
        break;
      case field::effect:
        toleration_.effect = v;
        break;
      default:
        break;
    }
    return true;
  }

  bool assign_taint(field f, std::string_view v) {
    switch (f) {
      case field::key:
        taint_.key = v;
        break;
      case field::value:
        taint_.value = v;
        break;
      case field::effect:
        taint_.effect = v;
        break;
      case field::time_added: {
        const auto t = base::parse_rfc3339(v);
        if (!t) {
          return fail_at(f, "not an RFC 3339 time: " + clip(v));
        }
        taint_.time_added_unix = *t;
        break;
      }
      default:
        break;
    }
    return true;
  }

  void start_element(frame_kind element) {
    switch (element) {
      case frame_kind::object_root:
        builder_ = builder_type{};  // each item of a list is an object of its own
        break;
      case frame_kind::owner_ref:
        owner_kind_ = {};
        owner_controller_ = false;
        break;
      case frame_kind::toleration:
        toleration_ = toleration_fields{};
        break;
      case frame_kind::taint:
        taint_ = taint_fields{};
        break;
      case frame_kind::condition:
        condition_ = condition_fields{};
        break;
      default:
        break;
    }
  }

  /// The frame an object-valued field opens; nullopt = skip its content.
  static std::optional<frame_kind> object_frame(frame_kind parent, field f) noexcept {
    switch (f) {
      case field::object:
        return frame_kind::object_root;
      case field::metadata:
        return parent == frame_kind::list_root ? frame_kind::list_meta : frame_kind::metadata;
      case field::annotations:
        return frame_kind::annotations;
      case field::labels:
        return frame_kind::labels;
      case field::spec:
        return is_pod ? frame_kind::pod_spec : frame_kind::node_spec;
      case field::status:
        if (is_pod) {
          return frame_kind::pod_status;
        }
        return std::nullopt;  // node status: conditions, images, ... nothing we need
      default:
        return std::nullopt;
    }
  }

  /// The frame a known array-valued field opens.
  static frame_kind array_frame(field f) noexcept {
    switch (f) {
      case field::items:
        return frame_kind::items;
      case field::owner_references:
        return frame_kind::owner_refs;
      case field::tolerations:
        return frame_kind::tolerations;
      case field::conditions:
        return frame_kind::conditions;
      default:
        return frame_kind::taints;
    }
  }

  /// What completes an element of a known array.
  bool end_element(frame_kind element) {
    switch (element) {
      case frame_kind::owner_ref:
        if constexpr (is_pod) {
          builder_.owner_reference(owner_kind_, owner_controller_);
        }
        break;
      case frame_kind::toleration:
        if constexpr (is_pod) {
          builder_.toleration(toleration_);
        }
        break;
      case frame_kind::taint:
        if constexpr (!is_pod) {
          builder_.taint(taint_);
        }
        break;
      case frame_kind::condition:
        if constexpr (is_pod) {
          builder_.condition(condition_);
        }
        break;
      case frame_kind::object_root:  // an element of items
        if (const std::string_view missing = builder_.missing(); !missing.empty()) {
          return fail(errc::unexpected_shape, path() + "." + std::string(missing) + ": missing");
        }
        items_.push_back(builder_.finish());
        builder_ = builder_type{};
        break;
      default:
        break;
    }
    return true;
  }

  [[nodiscard]] field lookup(frame_kind kind, std::string_view k) const noexcept {
    switch (kind) {
      case frame_kind::event_root:
        return k == "type" ? field::type : k == "object" ? field::object : field::none;
      case frame_kind::list_root:
        return k == "items" ? field::items : k == "metadata" ? field::metadata : field::none;
      case frame_kind::list_meta:
        return k == "resourceVersion" ? field::resource_version
               : k == "continue"      ? field::continue_token
                                      : field::none;
      case frame_kind::object_root:
        if (k == "metadata") {
          return field::metadata;
        }
        if (k == "spec") {
          return field::spec;
        }
        if (k == "status") {
          return field::status;
        }
        if (k == "code") {
          return field::code;
        }
        if (k == "reason") {
          return field::reason;
        }
        return k == "message" ? field::message : field::none;
      case frame_kind::metadata:
        if (k == "name") {
          return field::name;
        }
        if (k == "resourceVersion") {
          return field::resource_version;
        }
        if constexpr (is_pod) {
          if (k == "uid") {
            return field::uid;
          }
          if (k == "namespace") {
            return field::namespace_;
          }
          if (k == "deletionTimestamp") {
            return field::deletion_timestamp;
          }
          if (k == "creationTimestamp") {
            return field::creation_timestamp;
          }
          if (k == "annotations") {
            return field::annotations;
          }
          if (k == "labels" && builder_.keeps_labels()) {
            return field::labels;
          }
          if (k == "ownerReferences") {
            return field::owner_references;
          }
        }
        return field::none;
      case frame_kind::annotations:
        return k == mirror_annotation                ? field::mirror
               : k == controller::opt_out_annotation ? field::opt_out
                                                     : field::none;
      case frame_kind::labels:
        return field::label;
      case frame_kind::owner_ref:
        return k == "kind" ? field::kind : k == "controller" ? field::controller : field::none;
      case frame_kind::pod_spec:
        return k == "nodeName"      ? field::node_name
               : k == "tolerations" ? field::tolerations
                                    : field::none;
      case frame_kind::toleration:
        if (k == "key") {
          return field::key;
        }
        if (k == "operator") {
          return field::operator_;
        }
        if (k == "value") {
          return field::value;
        }
        if (k == "effect") {
          return field::effect;
        }
        return k == "tolerationSeconds" ? field::toleration_seconds : field::none;
      case frame_kind::pod_status:
        return k == "phase" ? field::phase : k == "conditions" ? field::conditions : field::none;
      case frame_kind::condition:
        if (k == "type") {
          return field::type;
        }
        if (k == "status") {
          return field::condition_status;
        }
        if (k == "reason") {
          return field::reason;
        }
        if (k == "lastTransitionTime") {
          return field::last_transition_time;
        }
        return k == "message" ? field::message : field::none;
      case frame_kind::node_spec:
        return k == "taints" ? field::taints : field::none;
      case frame_kind::taint:
        if (k == "key") {
          return field::key;
        }
        if (k == "value") {
          return field::value;
        }
        if (k == "effect") {
          return field::effect;
        }
        return k == "timeAdded" ? field::time_added : field::none;
      default:
        return field::none;
    }
  }

  /// The JSON path of the current container, e.g. "items[3].spec.tolerations".
  [[nodiscard]] std::string path() const {
    std::string out;
    for (std::size_t i = 0; i < depth_; ++i) {
      if (path_[i].name.empty()) {
        out += '[';
        out += std::to_string(path_[i].index);
        out += ']';
      } else {
        if (!out.empty()) {
          out += '.';
        }
        out += path_[i].name;
      }
    }
    return out;
  }

  [[nodiscard]] std::string path_to(field f) const {
    std::string p = path();
    if (!p.empty()) {
      p += '.';
    }
    p += json_name(f);
    return p;
  }

  /// Input quoted in an error message: clipped and escaped (it ends up in logs).
  static std::string clip(std::string_view text) { return printable(text, max_error_detail); }

  bool fail(errc code, std::string_view message) {
    if (!error_) {
      std::string full(what_);
      full += ": ";
      full += message;
      if constexpr (is_pod) {
        if (const auto& pod = builder_.record().pod; !pod.name.empty()) {
          full += " (pod " + clip(pod.namespace_) + "/" + clip(pod.name) + ")";
        }
      } else {
        if (const auto& node = builder_.record().node; !node.name.empty()) {
          full += " (node " + clip(node.name) + ")";
        }
      }
      error_ = make_error(code, std::move(full));
    }
    return false;
  }

  bool fail_at(field f, const std::string& why) {
    return fail(errc::unexpected_shape, path_to(f) + ": " + why);
  }

  bool fail_type(field f, std::string_view got) {
    return fail_at(f,
                   "expected " + std::string(describe(shape_of(f))) + ", got " + std::string(got));
  }

  mode mode_;
  std::string_view what_;
  std::array<step, 8> path_{};
  std::size_t depth_ = 0;

  builder_type builder_;
  std::vector<Record> items_;
  // The element of an array being read: its fields, handed to builder_ at its end.
  toleration_fields toleration_;
  taint_fields taint_;
  condition_fields condition_;
  std::string_view owner_kind_;
  bool owner_controller_ = false;

  std::string type_;
  bool saw_type_ = false;
  bool saw_object_ = false;
  std::string_view member_key_;  // The name of the member being read (a label's key).
  api_status status_;
  std::string list_rv_;
  std::string continue_;

  std::optional<error> error_;
};

/// `text` without a leading UTF-8 byte order mark (nlohmann skips one; simdjson does not).
inline std::string_view without_bom(std::string_view text) noexcept {
  return text.substr(0, 3) == "\xEF\xBB\xBF" ? text.substr(3) : text;
}

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
  if (!h.saw_type()) {
    return bad("type: missing");
  }
  const auto type = parse_event_type(h.type());
  if (!type) {
    return bad("type: unknown watch event type \"" + printable(h.type(), 64) + "\"");
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
