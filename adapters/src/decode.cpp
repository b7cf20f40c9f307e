#include "tec/adapters/decode.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "json_reader.hpp"

namespace tec::adapters {
namespace {

using nlohmann::json;

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
  annotations,
  mirror,
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
    case field::annotations:
      return "annotations";
    case field::mirror:
      return "kubernetes.io/config.mirror";
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

constexpr bool is_array(frame_kind k) noexcept {
  return k == frame_kind::items || k == frame_kind::owner_refs || k == frame_kind::tolerations ||
         k == frame_kind::taints || k == frame_kind::conditions;
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

constexpr std::size_t max_error_detail = 200;

/// The SAX handler: a small explicit stack of the containers we care about, a depth counter
/// for the ones we skip, and the record being filled.
template <class Record>
class handler {
public:
  static constexpr bool is_pod = std::is_same_v<Record, pod_record>;

  handler(mode m, std::string_view what) : mode_(m), what_(what) {}

  // --- nlohmann SAX interface -------------------------------------------------------------

  bool null() {
    if (skip_ > 0) {
      return true;
    }
    if (depth_ == 0) {
      return fail_root("null");
    }
    if (is_array(top().kind)) {
      ++top().count;
      return fail_element("null");
    }
    pending_ = field::none;  // null: the field is absent
    return true;
  }

  bool boolean(bool v) {
    const auto f = scalar_slot("a boolean");
    if (!f) {
      return false;
    }
    if (*f == field::none) {
      return true;
    }
    if (*f == field::controller && top().kind == frame_kind::owner_ref) {
      owner_controller_ = v;
      return true;
    }
    return fail_type(*f, "a boolean");
  }

  bool number_integer(json::number_integer_t v) { return integer(v, "a number"); }

  bool number_unsigned(json::number_unsigned_t v) {
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return integer(std::nullopt, "a number");
    }
    return integer(static_cast<std::int64_t>(v), "a number");
  }

  bool number_float(json::number_float_t /*v*/, const std::string& text) {
    const auto f = scalar_slot("a number");
    if (!f) {
      return false;
    }
    if (*f == field::none) {
      return true;
    }
    if (shape_of(*f) == shape::integer) {
      return fail_at(*f, "expected an integer, got " + clip(text));
    }
    return fail_type(*f, "a number");
  }

  bool string(std::string& v) { return string_value(v); }

  bool string_value(std::string_view v) {
    const auto f = scalar_slot("a string");
    if (!f) {
      return false;
    }
    if (*f == field::none) {
      return true;
    }
    const shape s = shape_of(*f);
    if (s != shape::string && s != shape::string_or_object) {
      return fail_type(*f, "a string");
    }
    return assign_string(*f, v);
  }

  bool binary(json::binary_t& /*v*/) { return true; }  // not produced by the JSON parser

  bool start_object(std::size_t /*size*/) {
    if (skip_ > 0) {
      ++skip_;
      return true;
    }
    if (depth_ == 0) {
      push(mode_ == mode::event  ? frame_kind::event_root
           : mode_ == mode::list ? frame_kind::list_root
                                 : frame_kind::object_root,
           field::none);
      return true;
    }
    frame& parent = top();
    if (is_array(parent.kind)) {
      ++parent.count;
      const frame_kind element = element_of(parent.kind);
      start_element(element);
      push(element, field::none);
      return true;
    }
    const field f = std::exchange(pending_, field::none);
    if (f == field::none) {
      skip_ = 1;
      return true;
    }
    const shape s = shape_of(f);
    if (s != shape::object && s != shape::string_or_object) {
      return fail_type(f, "an object");
    }
    const std::optional<frame_kind> kind = object_frame(parent.kind, f);
    if (!kind) {
      skip_ = 1;
      return true;
    }
    if (*kind == frame_kind::object_root) {
      saw_object_ = true;
      cur_ = Record{};
    }
    push(*kind, f);
    return true;
  }

  bool key(std::string& k) { return key_name(k); }

  bool key_name(std::string_view k) {
    if (skip_ == 0) {
      pending_ = lookup(top().kind, k);
    }
    return true;
  }

  /// For json_reader: whether the value starting with `first` at the current position is
  /// read at all. Unknown fields (and a node's status object) are validated but not
  /// materialised.
  bool value_wanted(char first) noexcept {
    if (skip_ > 0) {
      return false;
    }
    if (depth_ == 0 || is_array(top().kind)) {
      return true;
    }
    if (pending_ == field::none || (!is_pod && pending_ == field::status &&
                                    top().kind == frame_kind::object_root && first == '{')) {
      pending_ = field::none;
      return false;
    }
    return true;
  }

  /// For json_reader: a syntax error at byte `position`.
  bool syntax_error(std::size_t position, std::string_view what) {
    return fail(errc::malformed_json,
                "malformed JSON at byte " + std::to_string(position) + ": " + std::string(what));
  }

  bool end_object() {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    const frame done = pop();
    switch (done.kind) {
      case frame_kind::owner_ref:
        if constexpr (is_pod) {
          // The first owner reference with controller=true is the controller (GetControllerOf).
          if (owner_controller_ && !have_controller_) {
            cur_.pod.owner_kind = std::move(owner_kind_);
            have_controller_ = true;
          }
        }
        break;
      case frame_kind::toleration:
        if constexpr (is_pod) {
          cur_.pod.tolerations.push_back(std::move(toleration_));
        }
        break;
      case frame_kind::taint:
        if constexpr (!is_pod) {
          cur_.node.taints.push_back(std::move(taint_));
        }
        break;
      case frame_kind::condition:
        if constexpr (is_pod) {
          // The first DisruptionTarget condition counts (upstream's GetPodCondition).
          if (condition_.target && cur_.disruption == disruption_state::absent) {
            cur_.disruption = !condition_.is_true ? disruption_state::not_true
                              : condition_.reason_ours && condition_.message_ours
                                  ? disruption_state::true_ours
                                  : disruption_state::true_other;
          }
        }
        break;
      case frame_kind::object_root:
        if (depth_ > 0 && top().kind == frame_kind::items) {
          if (const std::string_view missing = missing_required(cur_); !missing.empty()) {
            return fail(errc::unexpected_shape, path() + "[" + std::to_string(top().count - 1) +
                                                    "]." + std::string(missing) + ": missing");
          }
          items_.push_back(std::move(cur_));
          cur_ = Record{};
        }
        break;
      default:
        break;
    }
    return true;
  }

  bool start_array(std::size_t /*size*/) {
    if (skip_ > 0) {
      ++skip_;
      return true;
    }
    if (depth_ == 0) {
      return fail_root("an array");
    }
    frame& parent = top();
    if (is_array(parent.kind)) {
      ++parent.count;
      return fail_element("an array");
    }
    const field f = std::exchange(pending_, field::none);
    if (f == field::none) {
      skip_ = 1;
      return true;
    }
    if (shape_of(f) != shape::array) {
      return fail_type(f, "an array");
    }
    const std::optional<frame_kind> kind = array_frame(parent.kind, f);
    if (!kind) {
      skip_ = 1;
      return true;
    }
    push(*kind, f);
    return true;
  }

  bool end_array() {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    pop();
    return true;
  }

  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const json::exception& e) {
    // e.what() quotes at most the last token read, which is object data, never a credential.
    return fail(errc::malformed_json,
                "malformed JSON at byte " + std::to_string(position) + ": " + clip(e.what()));
  }

  /// Records a malformed-JSON error found outside the SAX callbacks.
  void malformed(std::string_view why) {
    fail(errc::malformed_json, "malformed JSON: " + clip(why));
  }

  // --- results ----------------------------------------------------------------------------

  [[nodiscard]] const std::optional<error>& failure() const noexcept { return error_; }
  error take_failure() { return std::move(*error_); }
  Record& record() noexcept { return cur_; }
  std::vector<Record>& items() noexcept { return items_; }
  api_status& status() noexcept { return status_; }
  [[nodiscard]] const std::string& type() const noexcept { return type_; }
  [[nodiscard]] bool saw_type() const noexcept { return saw_type_; }
  [[nodiscard]] bool saw_object() const noexcept { return saw_object_; }
  std::string& list_resource_version() noexcept { return list_rv_; }
  std::string& continue_token() noexcept { return continue_; }
  [[nodiscard]] std::string_view what() const noexcept { return what_; }

  /// The first required field missing from `r` ("metadata.name", "metadata.uid"), or "".
  static std::string_view missing_required(const Record& r) noexcept {
    const auto& view = [&]() -> const auto& {
      if constexpr (is_pod) {
        return r.pod;
      } else {
        return r.node;
      }
    }
    ();
    if (view.name.empty()) {
      return "metadata.name";
    }
    if (view.uid.empty()) {
      return "metadata.uid";
    }
    return "";
  }

private:
  struct frame {
    frame_kind kind = frame_kind::object_root;
    field opened_by = field::none;
    std::uint32_t count = 0;  // arrays: elements started so far
  };

  frame& top() noexcept { return stack_[depth_ - 1]; }

  void push(frame_kind kind, field opened_by) noexcept {
    // Only known fields push frames, so the depth is bounded by the schema (at most 6).
    stack_[depth_++] = frame{kind, opened_by, 0};
  }

  frame pop() noexcept { return stack_[--depth_]; }

  /// Common prologue of every scalar: the field it is for (none = ignore), or nullopt after
  /// recording a type error.
  std::optional<field> scalar_slot(std::string_view got) {
    if (skip_ > 0) {
      return field::none;
    }
    if (depth_ == 0) {
      fail_root(got);
      return std::nullopt;
    }
    if (is_array(top().kind)) {
      ++top().count;
      fail_element(got);
      return std::nullopt;
    }
    return std::exchange(pending_, field::none);
  }

  bool integer(std::optional<std::int64_t> v, std::string_view got) {
    const auto f = scalar_slot(got);
    if (!f) {
      return false;
    }
    if (*f == field::none) {
      return true;
    }
    if (*f == field::toleration_seconds && top().kind == frame_kind::toleration) {
      if (!v) {
        return fail_at(*f, "integer out of int64 range");
      }
      toleration_.seconds = *v;
      return true;
    }
    if (*f == field::code && top().kind == frame_kind::object_root) {
      if (!v || *v < std::numeric_limits<std::int32_t>::min() ||
          *v > std::numeric_limits<std::int32_t>::max()) {
        return fail_at(*f, "integer out of int32 range");
      }
      status_.code = static_cast<std::int32_t>(*v);
      return true;
    }
    return fail_type(*f, got);
  }

  bool assign_string(field f, std::string_view v) {
    switch (top().kind) {
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
          cur_.pod.mirror = true;
        }
        return true;
      case frame_kind::owner_ref:
        owner_kind_ = v;
        return true;
      case frame_kind::pod_spec:
        if constexpr (is_pod) {
          cur_.pod.node_name = v;
        }
        return true;
      case frame_kind::pod_status:
        if constexpr (is_pod) {
          cur_.pod.phase = parse_pod_phase(v);
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

  // Compared on the fly: a condition's strings are never copied.
  void assign_condition(field f, std::string_view v) noexcept {
    switch (f) {
      case field::type:
        condition_.target = v == disruption_target_type;
        break;
      case field::condition_status:
        condition_.is_true = v == "True";
        break;
      case field::reason:
        condition_.reason_ours = v == taint_manager_reason;
        break;
      case field::message:
        condition_.message_ours = v == taint_manager_message;
        break;
      default:
        break;
    }
  }

  bool assign_metadata(field f, std::string_view v) {
    auto& view = [&]() -> auto& {
      if constexpr (is_pod) {
        return cur_.pod;
      } else {
        return cur_.node;
      }
    }
    ();
    switch (f) {
      case field::name:
        view.name = v;
        break;
      case field::uid:
        view.uid = v;
        break;
      case field::resource_version:
        cur_.resource_version = v;
        break;
      case field::namespace_:
        if constexpr (is_pod) {
          cur_.pod.namespace_ = v;
        }
        break;
      case field::deletion_timestamp:
        if constexpr (is_pod) {
          cur_.pod.terminating = true;
        }
        break;
      default:
        break;
    }
    return true;
  }

  bool assign_toleration(field f, std::string_view v) {
    switch (f) {
      case field::key:
        toleration_.key = v;
        break;
      case field::operator_:
        toleration_.op = parse_toleration_operator(v);
        break;
      case field::value:
        toleration_.value = v;
        break;
      case field::effect:
        if (v.empty()) {
          toleration_.effect.reset();
        } else {
          toleration_.effect = parse_taint_effect(v);
        }
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
        taint_.effect = parse_taint_effect(v);
        break;
      case field::time_added: {
        const auto t = parse_rfc3339(v);
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
        cur_ = Record{};
        have_controller_ = false;  // each item of a list has its own controller reference
        break;
      case frame_kind::owner_ref:
        owner_kind_.clear();
        owner_controller_ = false;
        break;
      case frame_kind::toleration:
        toleration_ = controller::toleration{};
        break;
      case frame_kind::taint:
        taint_ = controller::taint{};
        // The model defaults to NoExecute; a taint without an effect must not evict.
        taint_.effect = controller::taint_effect::unknown;
        break;
      case frame_kind::condition:
        condition_ = condition_flags{};
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

  static std::optional<frame_kind> array_frame(frame_kind /*parent*/, field f) noexcept {
    switch (f) {
      case field::items:
        return frame_kind::items;
      case field::owner_references:
        return frame_kind::owner_refs;
      case field::tolerations:
        return frame_kind::tolerations;
      case field::taints:
        return frame_kind::taints;
      case field::conditions:
        return frame_kind::conditions;
      default:
        return std::nullopt;
    }
  }

  static field lookup(frame_kind kind, std::string_view k) noexcept {
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
        if (k == "uid") {
          return field::uid;
        }
        if (k == "resourceVersion") {
          return field::resource_version;
        }
        if constexpr (is_pod) {
          if (k == "namespace") {
            return field::namespace_;
          }
          if (k == "deletionTimestamp") {
            return field::deletion_timestamp;
          }
          if (k == "annotations") {
            return field::annotations;
          }
          if (k == "ownerReferences") {
            return field::owner_references;
          }
        }
        return field::none;
      case frame_kind::annotations:
        return k == "kubernetes.io/config.mirror" ? field::mirror : field::none;
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
    for (std::size_t i = 1; i < depth_; ++i) {
      const frame& parent = stack_[i - 1];
      if (is_array(parent.kind)) {
        out += '[';
        out += std::to_string(parent.count - 1);
        out += ']';
      } else {
        if (!out.empty()) {
          out += '.';
        }
        out += json_name(stack_[i].opened_by);
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

  bool fail(errc code, std::string message) {
    if (!error_) {
      std::string full(what_);
      full += ": ";
      full += message;
      if constexpr (is_pod) {
        if (!cur_.pod.name.empty()) {
          full += " (pod " + clip(cur_.pod.namespace_) + "/" + clip(cur_.pod.name) + ")";
        }
      } else {
        if (!cur_.node.name.empty()) {
          full += " (node " + clip(cur_.node.name) + ")";
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

  bool fail_element(std::string_view got) {
    const std::string where = path() + "[" + std::to_string(top().count - 1) + "]";
    return fail(errc::unexpected_shape, where + ": expected an object, got " + std::string(got));
  }

  bool fail_root(std::string_view got) {
    return fail(errc::unexpected_shape, "expected a JSON object, got " + std::string(got));
  }

  mode mode_;
  std::string_view what_;
  std::array<frame, 8> stack_{};
  std::size_t depth_ = 0;
  std::size_t skip_ = 0;  // depth inside a skipped container
  field pending_ = field::none;

  Record cur_{};
  std::vector<Record> items_;
  controller::toleration toleration_{};
  controller::taint taint_{};
  // The condition being read (pods): what matters of it, as flags.
  struct condition_flags {
    bool target = false;  // type DisruptionTarget
    bool is_true = false;
    bool reason_ours = false;
    bool message_ours = false;
  };
  condition_flags condition_{};
  std::string owner_kind_;
  bool owner_controller_ = false;
  bool have_controller_ = false;

  std::string type_;
  bool saw_type_ = false;
  bool saw_object_ = false;
  api_status status_;
  std::string list_rv_;
  std::string continue_;

  std::optional<error> error_;
};

/// Runs the SAX parse; false when the handler recorded an error.
template <class Record>
bool run(handler<Record>& h, std::string_view text, json_engine engine) {
  if (engine == json_engine::fast) {
    detail::json_reader<handler<Record>> reader(text, h);
    const bool ok = reader.run();
    if (!ok && !h.failure()) {
      h.malformed("parse failed");
    }
    return ok;
  }
  bool ok = false;
  try {
    ok = json::sax_parse(text.data(), text.data() + text.size(), &h);
  } catch (const json::exception& e) {
    // sax_parse reports errors through the handler; this is belt and braces.
    h.malformed(e.what());
    return false;
  }
  if (!ok && !h.failure()) {
    h.malformed("parse failed");
  }
  return ok;
}

std::optional<event_type> parse_event_type(std::string_view s) noexcept {
  if (s == "ADDED") {
    return event_type::added;
  }
  if (s == "MODIFIED") {
    return event_type::modified;
  }
  if (s == "DELETED") {
    return event_type::deleted;
  }
  if (s == "BOOKMARK") {
    return event_type::bookmark;
  }
  if (s == "ERROR") {
    return event_type::error;
  }
  return std::nullopt;
}

template <class Record>
result<watch_event<Record>> decode_event(std::string_view line, std::string_view what,
                                         json_engine engine) {
  handler<Record> h(mode::event, what);
  if (!run(h, line, engine)) {
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
    if (h.record().resource_version.empty()) {
      return bad("object.metadata.resourceVersion: missing in a BOOKMARK event");
    }
    event.object.resource_version = std::move(h.record().resource_version);
    return event;
  }
  if (const auto missing = handler<Record>::missing_required(h.record()); !missing.empty()) {
    return bad("object." + std::string(missing) + ": missing");
  }
  event.object = std::move(h.record());
  return event;
}

template <class Record>
result<list_page<Record>> decode_list(std::string_view body, std::string_view what,
                                      json_engine engine) {
  handler<Record> h(mode::list, what);
  if (!run(h, body, engine)) {
    return h.take_failure();
  }
  list_page<Record> page;
  page.items = std::move(h.items());
  page.resource_version = std::move(h.list_resource_version());
  page.continue_token = std::move(h.continue_token());
  return page;
}

template <class Record>
result<Record> decode_object(std::string_view json_text, std::string_view what,
                             json_engine engine) {
  handler<Record> h(mode::object, what);
  if (!run(h, json_text, engine)) {
    return h.take_failure();
  }
  if (const auto missing = handler<Record>::missing_required(h.record()); !missing.empty()) {
    return make_error(errc::unexpected_shape,
                      std::string(what) + ": " + std::string(missing) + ": missing");
  }
  return std::move(h.record());
}

}  // namespace

std::string_view to_string(event_type type) noexcept {
  switch (type) {
    case event_type::added:
      return "ADDED";
    case event_type::modified:
      return "MODIFIED";
    case event_type::deleted:
      return "DELETED";
    case event_type::bookmark:
      return "BOOKMARK";
    case event_type::error:
      return "ERROR";
  }
  return "UNKNOWN";
}

result<pod_event> decode_pod_event(std::string_view line, json_engine engine) {
  return decode_event<pod_record>(line, "pod watch event", engine);
}

result<node_event> decode_node_event(std::string_view line, json_engine engine) {
  return decode_event<node_record>(line, "node watch event", engine);
}

result<pod_list> decode_pod_list(std::string_view body, json_engine engine) {
  return decode_list<pod_record>(body, "pod list", engine);
}

result<node_list> decode_node_list(std::string_view body, json_engine engine) {
  return decode_list<node_record>(body, "node list", engine);
}

result<pod_record> decode_pod(std::string_view json_text, json_engine engine) {
  return decode_object<pod_record>(json_text, "pod", engine);
}

result<node_record> decode_node(std::string_view json_text, json_engine engine) {
  return decode_object<node_record>(json_text, "node", engine);
}

// ---- list_splitter ------------------------------------------------------------------------

namespace {

constexpr bool is_ws(char c) noexcept {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/// Bytes that matter while skipping through an element outside its strings.
constexpr std::array<bool, 256> element_marks = [] {
  std::array<bool, 256> t{};
  for (const char c : {'"', '{', '[', '}', ']'}) {
    t[static_cast<unsigned char>(c)] = true;
  }
  return t;
}();

/// A key of the root object as written (escapes included) is "items".
bool is_items_key(const std::string& raw) {
  if (raw.find('\\') == std::string::npos) {
    return raw == "items";
  }
  const json key = json::parse("\"" + raw + "\"", nullptr, /*allow_exceptions=*/false);
  return key.is_string() && key.get_ref<const std::string&>() == "items";
}

}  // namespace

void list_splitter::fail(error why) {
  if (!failure_) {
    failure_ = std::move(why);
  }
  std::string().swap(element_);
  std::string().swap(envelope_);
}

bool list_splitter::malformed(std::string_view what, std::size_t at) {
  fail(make_error(errc::malformed_json,
                  "list: malformed JSON at byte " + std::to_string(at) + ": " + std::string(what)));
  return false;
}

bool list_splitter::too_large(std::string_view what, std::size_t limit) {
  fail(make_error(errc::response_too_large, "list: " + std::string(what) + " is larger than " +
                                                std::to_string(limit) + " bytes (after " +
                                                std::to_string(items_) + " items)"));
  return false;
}

bool list_splitter::envelope_byte(char c) {
  if (envelope_.size() >= limits_.max_item_bytes) {
    return too_large("the part of the body outside items", limits_.max_item_bytes);
  }
  envelope_.push_back(c);
  switch (state_) {
    case state::envelope_escape:
      state_ = state::envelope_string;
      break;
    case state::envelope_string:
      if (c == '\\') {
        state_ = state::envelope_escape;
      } else if (c == '"') {
        state_ = state::envelope;
        if (in_key_) {
          in_key_ = false;
          expect_key_ = false;
          items_key_ = !key_too_long_ && is_items_key(key_);
        }
        return true;
      }
      break;
    default:
      switch (c) {
        case '"':
          state_ = state::envelope_string;
          if (depth_ == 1 && root_is_object_ && expect_key_) {
            in_key_ = true;
            key_.clear();
            key_too_long_ = false;
          }
          return true;
        case '{':
        case '[':
          if (++depth_ == 1) {
            root_is_object_ = c == '{';
            expect_key_ = root_is_object_;
          }
          return true;
        case '}':
        case ']':
          // A mismatched bracket is left for the envelope's decoder to report.
          if (depth_ > 0) {
            --depth_;
          }
          return true;
        case ',':
          expect_key_ = depth_ == 1 && root_is_object_;
          return true;
        case ':':
          if (depth_ == 1 && root_is_object_) {
            items_value_next_ = items_key_;
            items_key_ = false;
          }
          return true;
        default:
          return true;
      }
  }
  if (in_key_) {
    // No spelling of "items" (even fully \u-escaped) is longer than this.
    if (key_.size() < 32) {
      key_.push_back(c);
    } else {
      key_too_long_ = true;
    }
  }
  return true;
}

bool list_splitter::keep_partial_element(std::string_view chunk) {
  const std::size_t piece = chunk.size() - offset_;
  if (element_.size() + piece > limits_.max_item_bytes) {
    return too_large("item " + std::to_string(items_), limits_.max_item_bytes);
  }
  element_.append(chunk.substr(offset_));
  return true;
}

bool list_splitter::complete_element(std::string_view chunk, std::size_t end,
                                     const std::function<bool(std::string_view)>& emit) {
  const std::size_t piece = end - offset_;
  if (element_.size() + piece > limits_.max_item_bytes) {
    return too_large("item " + std::to_string(items_), limits_.max_item_bytes);
  }
  std::string_view text = chunk.substr(offset_, piece);
  if (!element_.empty()) {
    element_.append(text);
    text = element_;
  }
  ++items_;
  state_ = state::items_after;
  const bool keep = emit(text);
  // Keep a modest buffer for reuse; give back what an unusually large item grew it to.
  if (element_.capacity() > (std::size_t{1} << 20U)) {
    std::string().swap(element_);
  } else {
    element_.clear();
  }
  if (!keep) {
    if (!failure_) {
      fail(make_error(errc::malformed_json, "list: stopped at item " + std::to_string(items_)));
    }
    return false;
  }
  return true;
}

bool list_splitter::scan(std::string_view chunk,
                         const std::function<bool(std::string_view)>& emit) {
  if (failure_) {
    return false;
  }
  const std::size_t base = bytes_;
  if (chunk.size() > limits_.max_page_bytes - std::min(bytes_, limits_.max_page_bytes)) {
    bytes_ += chunk.size();
    return too_large("the body", limits_.max_page_bytes);
  }
  bytes_ += chunk.size();
  offset_ = 0;  // an element in progress continues at the start of this chunk
  const char* const p = chunk.data();
  const std::size_t n = chunk.size();
  std::size_t i = 0;
  while (i < n) {
    switch (state_) {
      case state::envelope:
        if (items_value_next_ && !is_ws(p[i])) {
          items_value_next_ = false;
          if (p[i] == '[') {
            if (envelope_.size() >= limits_.max_item_bytes) {
              return too_large("the part of the body outside items", limits_.max_item_bytes);
            }
            envelope_.push_back('[');
            state_ = state::items_start;
            ++i;
            break;
          }
        }
        [[fallthrough]];
      case state::envelope_string:
      case state::envelope_escape:
        if (!envelope_byte(p[i])) {
          return false;
        }
        ++i;
        break;
      case state::items_start:
      case state::items_next:
      case state::items_after: {
        const char c = p[i];
        if (is_ws(c)) {
          ++i;
          break;
        }
        if (state_ == state::items_after || c == ']') {
          if (c == ']' && state_ != state::items_next) {
            envelope_.push_back(']');  // the '[' was counted against the bound
            state_ = state::envelope;
          } else if (c == ',' && state_ == state::items_after) {
            state_ = state::items_next;
          } else {
            return malformed(state_ == state::items_after ? "expected ',' or ']' after an item"
                                                          : "expected an item after ','",
                             base + i);
          }
          ++i;
          break;
        }
        offset_ = i;
        element_.clear();
        string_element_ = false;
        if (c == '{' || c == '[') {
          element_depth_ = 1;
          state_ = state::element;
        } else if (c == '"') {
          string_element_ = true;
          state_ = state::element_string;
        } else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
          state_ = state::element_scalar;
        } else {
          return malformed("expected an item", base + i);
        }
        ++i;
        break;
      }
      case state::element:
        while (i < n && !element_marks[static_cast<unsigned char>(p[i])]) {
          ++i;
        }
        if (i == n) {
          break;
        }
        if (p[i] == '"') {
          state_ = state::element_string;
        } else if (p[i] == '{' || p[i] == '[') {
          ++element_depth_;
        } else if (--element_depth_ == 0) {
          if (!complete_element(chunk, i + 1, emit)) {
            return false;
          }
        }
        ++i;
        break;
      case state::element_string:
        while (i < n && p[i] != '"' && p[i] != '\\') {
          ++i;
        }
        if (i == n) {
          break;
        }
        if (p[i] == '\\') {
          state_ = state::element_escape;
          ++i;
        } else {
          ++i;
          if (string_element_) {
            if (!complete_element(chunk, i, emit)) {
              return false;
            }
          } else {
            state_ = state::element;
          }
        }
        break;
      case state::element_escape:
        state_ = state::element_string;
        ++i;
        break;
      case state::element_scalar:
        while (i < n && p[i] != ',' && p[i] != ']' && !is_ws(p[i])) {
          ++i;
        }
        if (i < n && !complete_element(chunk, i, emit)) {
          return false;
        }
        break;
    }
  }
  switch (state_) {
    case state::element:
    case state::element_string:
    case state::element_escape:
    case state::element_scalar:
      return keep_partial_element(chunk);
    default:
      return true;
  }
}

result<std::string> list_splitter::finish() {
  if (failure_) {
    return *failure_;
  }
  switch (state_) {
    case state::envelope:
    case state::envelope_string:
    case state::envelope_escape:
      // An envelope cut short is reported by its decoder ("unexpected end of input").
      return std::move(envelope_);
    default:
      malformed("unexpected end of input inside items", bytes_);
      return *failure_;
  }
}

result<api_status> decode_status(std::string_view json_text, json_engine engine) {
  handler<pod_record> h(mode::object, "status");
  if (!run(h, json_text, engine)) {
    return h.take_failure();
  }
  return std::move(h.status());
}

}  // namespace tec::adapters
