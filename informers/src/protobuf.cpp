#include "tec/informers/protobuf.hpp"

#include <initializer_list>
#include <optional>
#include <utility>

#include "tec/informers/decode.hpp"

#include "record_builder.hpp"

namespace tec::informers {
namespace {

using base::errc;
using base::error;
using base::make_error;
using base::result;

/// Go's zero time.Time as a metav1.Time message (seconds since the Unix epoch): the API server
/// writes it for a time that is not set (JSON: null), which the records keep as 0.
constexpr std::int64_t go_zero_time = -62'135'596'800;

/// One field of a message: its number, wire type and value (varints and fixed-width values in
/// `scalar`, length-delimited ones in `bytes`).
struct field {
  std::uint32_t number = 0;
  std::uint32_t wire = 0;
  std::uint64_t scalar = 0;
  std::string_view bytes;
};

bool read_varint(std::string_view in, std::size_t& pos, std::uint64_t& v) noexcept {
  v = 0;
  for (unsigned shift = 0; shift < 64 && pos < in.size(); shift += 7) {
    const auto b = static_cast<std::uint8_t>(in[pos++]);
    v |= static_cast<std::uint64_t>(b & 0x7fU) << shift;
    if ((b & 0x80U) == 0) {
      return true;
    }
  }
  return false;
}

/// Calls f(const field&) for each field of `message` in order; false when the bytes are not a
/// message (or f returned false: then `why` stays empty).
template <class F>
bool each_field(std::string_view message, std::string& why, F&& f) {
  std::size_t pos = 0;
  while (pos < message.size()) {
    std::uint64_t tag = 0;
    if (!read_varint(message, pos, tag) || (tag >> 3U) == 0 || (tag >> 3U) > 0x1fffffffU) {
      why = "a bad field tag";
      return false;
    }
    field fd;
    fd.number = static_cast<std::uint32_t>(tag >> 3U);
    fd.wire = static_cast<std::uint32_t>(tag & 7U);
    switch (fd.wire) {
      case pb::wire::varint:
        if (!read_varint(message, pos, fd.scalar)) {
          why = "a varint runs past the end";
          return false;
        }
        break;
      case pb::wire::fixed64:
      case pb::wire::fixed32: {
        const std::size_t n = fd.wire == pb::wire::fixed64 ? 8 : 4;
        if (message.size() - pos < n) {
          why = "a fixed-width value runs past the end";
          return false;
        }
        pos += n;
        break;
      }
      case pb::wire::length_delimited: {
        std::uint64_t len = 0;
        if (!read_varint(message, pos, len) || len > message.size() - pos) {
          why = "a length runs past the end";
          return false;
        }
        fd.bytes = message.substr(pos, static_cast<std::size_t>(len));
        pos += static_cast<std::size_t>(len);
        break;
      }
      default:
        why = "unsupported wire type " + std::to_string(fd.wire);
        return false;
    }
    if (!f(fd)) {
      return false;
    }
  }
  return true;
}

error malformed(std::string_view what, const std::string& why) {
  return make_error(errc::malformed_json, "malformed protobuf: " + std::string(what) + ": " + why);
}

/// A metav1.Time's seconds (0 for Go's zero time).
std::int64_t time_seconds(std::string_view message, std::string& why, bool& ok) {
  std::int64_t seconds = 0;
  ok = each_field(message, why, [&](const field& f) {
    if (f.number == pb::time::seconds && f.wire == pb::wire::varint) {
      seconds = static_cast<std::int64_t>(f.scalar);
    }
    return true;
  });
  return seconds == go_zero_time ? 0 : seconds;
}

/// Where read_fields() puts field `number`: a length-delimited field's bytes, a varint's value or
/// a metav1.Time message's seconds (time_seconds()). Other wire types are skipped.
struct slot {
  std::uint32_t number = 0;
  std::string_view* bytes = nullptr;
  std::optional<std::uint64_t>* varint = nullptr;
  std::int64_t* time = nullptr;
};

/// Reads the fields of `message` that `slots` name into them (the last copy wins) and skips the
/// others; false when the bytes are not a message.
bool read_fields(std::string_view message, std::string& why, std::initializer_list<slot> slots) {
  return each_field(message, why, [&](const field& f) {
    for (const slot& s : slots) {
      if (s.number != f.number) {
        continue;
      }
      if (f.wire == pb::wire::length_delimited && s.bytes != nullptr) {
        *s.bytes = f.bytes;
      } else if (f.wire == pb::wire::length_delimited && s.time != nullptr) {
        bool ok = false;
        *s.time = time_seconds(f.bytes, why, ok);
        return ok;
      } else if (f.wire == pb::wire::varint && s.varint != nullptr) {
        *s.varint = f.scalar;
      }
    }
    return true;
  });
}

/// Unknown.raw of an envelope ("k8s\0" + Unknown), or why not.
result<std::string_view> unwrap(std::string_view envelope, std::string_view what) {
  if (!is_protobuf(envelope)) {
    return malformed(what, "no k8s\\0 magic");
  }
  std::string why;
  std::string_view raw;
  bool encoded = false;
  if (!each_field(envelope.substr(4), why, [&](const field& f) {
        if (f.wire == pb::wire::length_delimited && f.number == pb::unknown::raw) {
          raw = f.bytes;
        } else if (f.wire == pb::wire::length_delimited &&
                   f.number == pb::unknown::content_encoding && !f.bytes.empty()) {
          encoded = true;
        }
        return true;
      })) {
    return malformed(what, why);
  }
  if (encoded) {
    return malformed(what, "unsupported contentEncoding");
  }
  return raw;
}

/// A Pod message into the pod builder (record_builder.hpp).
class pod_reader {
public:
  result<pod_record> read(std::string_view message) {
    if (!each_field(message, why_, [&](const field& f) {
          if (f.wire != pb::wire::length_delimited) {
            return true;
          }
          switch (f.number) {
            case pb::pod::metadata:
              return meta(f.bytes);
            case pb::pod::spec:
              return spec(f.bytes);
            case pb::pod::status:
              return status(f.bytes);
            default:
              return true;
          }
        })) {
      return malformed("pod", why_);
    }
    if (const std::string_view missing = b_.missing(); !missing.empty()) {
      return make_error(errc::unexpected_shape, "pod: " + std::string(missing) + ": missing");
    }
    return b_.finish();
  }

private:
  bool meta(std::string_view m) {
    return each_field(m, why_, [&](const field& f) {
      if (f.number == pb::object_meta::generation && f.wire == pb::wire::varint) {
        b_.generation(static_cast<std::int64_t>(f.scalar));  // int64: two's complement
        return true;
      }
      if (f.wire != pb::wire::length_delimited) {
        return true;
      }
      switch (f.number) {
        case pb::object_meta::name:
          b_.name(f.bytes);
          return true;
        case pb::object_meta::namespace_name:
          b_.namespace_name(f.bytes);
          return true;
        case pb::object_meta::uid:
          b_.uid(f.bytes);
          return true;
        case pb::object_meta::resource_version:
          b_.resource_version(f.bytes);
          return true;
        case pb::object_meta::creation_timestamp: {
          bool ok = false;
          b_.created(time_seconds(f.bytes, why_, ok));
          return ok;
        }
        case pb::object_meta::deletion_timestamp:
          b_.deleting();
          return true;
        case pb::object_meta::labels:
          return !b_.keeps_labels() || entry(f.bytes, &pod_builder::label);
        case pb::object_meta::annotations:
          return entry(f.bytes, &pod_builder::annotation);
        case pb::object_meta::owner_references:
          return owner(f.bytes);
        default:
          return true;
      }
    });
  }

  /// A map entry {key = 1, value = 2} handed to `take` (label or annotation).
  bool entry(std::string_view m, void (pod_builder::*take)(std::string_view, std::string_view)) {
    std::string_view key;
    std::string_view value;
    if (!read_fields(m, why_, {{pb::map_entry::key, &key}, {pb::map_entry::value, &value}})) {
      return false;
    }
    (b_.*take)(key, value);
    return true;
  }

  bool owner(std::string_view m) {
    std::string_view kind;
    std::optional<std::uint64_t> is_controller;
    if (!read_fields(m, why_,
                     {{pb::owner_reference::kind, &kind},
                      {.number = pb::owner_reference::controller, .varint = &is_controller}})) {
      return false;
    }
    b_.owner_reference(kind, is_controller.value_or(0) != 0);
    return true;
  }

  bool spec(std::string_view m) {
    return each_field(m, why_, [&](const field& f) {
      if (f.wire == pb::wire::length_delimited && f.number == pb::pod_spec::node_name) {
        b_.node_name(f.bytes);
      } else if (f.wire == pb::wire::length_delimited && f.number == pb::pod_spec::tolerations) {
        return toleration(f.bytes);
      }
      return true;
    });
  }

  bool toleration(std::string_view m) {
    toleration_fields t;
    std::optional<std::uint64_t> seconds;
    if (!read_fields(m, why_,
                     {{pb::toleration::key, &t.key},
                      {pb::toleration::op, &t.operator_},
                      {pb::toleration::value, &t.value},
                      {pb::toleration::effect, &t.effect},
                      {.number = pb::toleration::toleration_seconds, .varint = &seconds}})) {
      return false;
    }
    if (seconds) {
      t.seconds = static_cast<std::int64_t>(*seconds);
    }
    b_.toleration(t);
    return true;
  }

  bool status(std::string_view m) {
    return each_field(m, why_, [&](const field& f) {
      if (f.wire == pb::wire::length_delimited && f.number == pb::pod_status::phase) {
        b_.phase(f.bytes);
      } else if (f.wire == pb::wire::length_delimited && f.number == pb::pod_status::conditions) {
        return condition(f.bytes);
      }
      return true;
    });
  }

  bool condition(std::string_view m) {
    condition_fields c;
    if (!read_fields(
            m, why_,
            {{pb::pod_condition::type, &c.type},
             {pb::pod_condition::status, &c.status},
             {.number = pb::pod_condition::last_transition_time, .time = &c.last_transition_unix},
             {pb::pod_condition::reason, &c.reason},
             {pb::pod_condition::message, &c.message}})) {
      return false;
    }
    b_.condition(c);
    return true;
  }

  pod_builder b_;
  std::string why_;
};

/// A Node message into the node builder.
class node_reader {
public:
  result<node_record> read(std::string_view message) {
    if (!each_field(message, why_, [&](const field& f) {
          if (f.wire != pb::wire::length_delimited) {
            return true;
          }
          if (f.number == pb::node::metadata) {
            return meta(f.bytes);
          }
          if (f.number == pb::node::spec) {
            return spec(f.bytes);
          }
          return true;
        })) {
      return malformed("node", why_);
    }
    if (const std::string_view missing = b_.missing(); !missing.empty()) {
      return make_error(errc::unexpected_shape, "node: " + std::string(missing) + ": missing");
    }
    return b_.finish();
  }

private:
  bool meta(std::string_view m) {
    return each_field(m, why_, [&](const field& f) {
      if (f.wire == pb::wire::length_delimited && f.number == pb::object_meta::name) {
        b_.name(f.bytes);
      } else if (f.wire == pb::wire::length_delimited &&
                 f.number == pb::object_meta::resource_version) {
        b_.resource_version(f.bytes);
      } else if (f.wire == pb::wire::length_delimited && f.number == pb::object_meta::annotations) {
        std::string_view key;
        std::string_view value;
        if (!read_fields(f.bytes, why_,
                         {{pb::map_entry::key, &key}, {pb::map_entry::value, &value}})) {
          return false;
        }
        if (node_builder::reads_annotation(key)) {
          b_.annotation(key, value);
        }
      }
      return true;
    });
  }

  bool spec(std::string_view m) {
    return each_field(m, why_, [&](const field& f) {
      if (f.wire == pb::wire::length_delimited && f.number == pb::node_spec::taints) {
        return taint(f.bytes);
      }
      return true;
    });
  }

  bool taint(std::string_view m) {
    taint_fields t;
    if (!read_fields(m, why_,
                     {{pb::taint::key, &t.key},
                      {pb::taint::value, &t.value},
                      {pb::taint::effect, &t.effect},
                      {.number = pb::taint::time_added, .time = &t.time_added_unix}})) {
      return false;
    }
    b_.taint(t);
    return true;
  }

  node_builder b_;
  std::string why_;
};

result<k8sclient::api_status> status_message(std::string_view message) {
  std::string_view status;
  std::string_view text;
  std::string_view reason;
  std::optional<std::uint64_t> code;
  std::string why;
  if (!read_fields(message, why,
                   {{pb::status::status, &status},
                    {pb::status::message, &text},
                    {pb::status::reason, &reason},
                    {.number = pb::status::code, .varint = &code}})) {
    return malformed("status", why);
  }
  k8sclient::api_status s;
  s.code = static_cast<std::int32_t>(code.value_or(0));
  s.reason = reason;
  s.message = text;
  s.status = status;
  return s;
}

template <class Record, class Reader>
result<k8sclient::watch_event<Record>> decode_event(std::string_view frame, std::string_view what) {
  std::string why;
  std::string_view type;
  std::string_view object;
  bool saw_type = false;
  bool saw_object = false;
  if (!each_field(frame, why, [&](const field& f) {
        if (f.wire == pb::wire::length_delimited && f.number == pb::watch_event::type) {
          type = f.bytes;
          saw_type = true;
        } else if (f.wire == pb::wire::length_delimited && f.number == pb::watch_event::object) {
          saw_object = true;
          return each_field(f.bytes, why, [&](const field& g) {
            if (g.wire == pb::wire::length_delimited && g.number == pb::raw_extension::raw) {
              object = g.bytes;
            }
            return true;
          });
        }
        return true;
      })) {
    return malformed(what, why);
  }
  auto bad = [&](const std::string& s) {
    return make_error(errc::unexpected_shape, std::string(what) + ": " + s);
  };
  if (!saw_type) {
    return bad("type: missing");
  }
  const auto t = parse_event_type(type);
  if (!t) {
    return bad("type: unknown watch event type \"" + base::printable(type, 64) + "\"");
  }
  if (!saw_object) {
    return bad("object: missing");
  }
  auto raw = unwrap(object, what);
  if (!raw) {
    return raw.error();
  }
  k8sclient::watch_event<Record> event;
  event.type = *t;
  if (*t == k8sclient::event_type::error) {
    auto s = status_message(raw.value());
    if (!s) {
      return s.error();
    }
    event.status = std::move(s).value();
    return event;
  }
  if (*t == k8sclient::event_type::bookmark) {
    // Only metadata.resourceVersion is set; the reader would ask for a name.
    std::string rv;
    if (!each_field(raw.value(), why, [&](const field& f) {
          if (f.wire == pb::wire::length_delimited && f.number == pb::pod::metadata) {
            return each_field(f.bytes, why, [&](const field& g) {
              if (g.wire == pb::wire::length_delimited &&
                  g.number == pb::object_meta::resource_version) {
                rv = g.bytes;
              }
              return true;
            });
          }
          return true;
        })) {
      return malformed(what, why);
    }
    if (rv.empty()) {
      return bad("object.metadata.resourceVersion: missing in a BOOKMARK event");
    }
    event.object.resource_version = std::move(rv);
    return event;
  }
  auto record = Reader().read(raw.value());
  if (!record) {
    error e = record.error();
    e.message = std::string(what) + ": object." + e.message;
    return e;
  }
  event.object = std::move(record).value();
  return event;
}

}  // namespace

bool is_protobuf(std::string_view body) noexcept {
  return body.size() >= 4 && body.substr(0, 4) == std::string_view("k8s\0", 4);
}

result<pod_record> decode_pod_message(std::string_view message) {
  return pod_reader().read(message);
}

result<node_record> decode_node_message(std::string_view message) {
  return node_reader().read(message);
}

result<pod_record> decode_pod_protobuf(std::string_view envelope) {
  auto raw = unwrap(envelope, "pod");
  if (!raw) {
    return raw.error();
  }
  return decode_pod_message(raw.value());
}

result<node_record> decode_node_protobuf(std::string_view envelope) {
  auto raw = unwrap(envelope, "node");
  if (!raw) {
    return raw.error();
  }
  return decode_node_message(raw.value());
}

result<k8sclient::watch_event<pod_record>> decode_pod_event_protobuf(std::string_view frame) {
  return decode_event<pod_record, pod_reader>(frame, "pod watch event");
}

result<k8sclient::watch_event<node_record>> decode_node_event_protobuf(std::string_view frame) {
  return decode_event<node_record, node_reader>(frame, "node watch event");
}

result<k8sclient::api_status> decode_status_protobuf(std::string_view envelope) {
  auto raw = unwrap(envelope, "status");
  if (!raw) {
    return raw.error();
  }
  return status_message(raw.value());
}

std::optional<protobuf_list_splitter::header> protobuf_list_splitter::next_header(std::size_t pos) {
  const std::string_view in = std::string_view(buf_).substr(pos);
  std::size_t p = 0;
  // The varint at p: false when more bytes are needed, or (failed) when 10 bytes do not end it.
  auto varint = [&](std::uint64_t& v, std::string_view bad) {
    const std::size_t start = p;
    if (read_varint(in, p, v)) {
      return true;
    }
    if (in.size() - start >= 10) {
      fail(malformed("list", std::string(bad)));
    }
    return false;
  };
  std::uint64_t tag = 0;
  if (!varint(tag, "a bad field tag")) {
    return std::nullopt;
  }
  header h;
  h.number = static_cast<std::uint32_t>(tag >> 3U);
  h.wire = static_cast<std::uint32_t>(tag & 7U);
  if (h.number == 0) {
    fail(malformed("list", "a bad field tag"));
    return std::nullopt;
  }
  switch (h.wire) {
    case pb::wire::varint: {
      std::uint64_t v = 0;
      const std::size_t start = p;
      if (!varint(v, "a bad varint")) {
        return std::nullopt;
      }
      h.header_bytes = start;
      h.length = p - start;
      return h;
    }
    case pb::wire::fixed64:
    case pb::wire::fixed32:
      h.header_bytes = p;
      h.length = h.wire == pb::wire::fixed64 ? 8 : 4;
      return h;
    case pb::wire::length_delimited: {
      std::uint64_t len = 0;
      if (!varint(len, "a bad length")) {
        return std::nullopt;
      }
      if (len > max_page_) {
        fail(make_error(errc::response_too_large,
                        "a list field is over " + std::to_string(max_page_) + " bytes"));
        return std::nullopt;
      }
      h.header_bytes = p;
      h.length = static_cast<std::size_t>(len);
      return h;
    }
    default:
      fail(malformed("list", "unsupported wire type " + std::to_string(h.wire)));
      return std::nullopt;
  }
}

bool protobuf_list_splitter::take_field(const header& h, std::string_view content) {
  if (h.number != pb::list::metadata || h.wire != pb::wire::length_delimited) {
    return true;
  }
  std::string why;
  if (!each_field(content, why, [&](const field& f) {
        if (f.wire == pb::wire::length_delimited && f.number == pb::list_meta::resource_version) {
          resource_version_ = f.bytes;
        } else if (f.wire == pb::wire::length_delimited &&
                   f.number == pb::list_meta::continue_token) {
          continue_ = f.bytes;
        }
        return true;
      })) {
    fail(malformed("list metadata", why));
    return false;
  }
  return true;
}

result<std::pair<std::string, std::string>> protobuf_list_splitter::finish() {
  if (failure_) {
    return *failure_;
  }
  if (!buf_.empty() || (level_ == level::list && list_left_ != 0)) {
    return malformed("list", "the body ended in the middle of a field");
  }
  if (!saw_list_) {
    return malformed("list", "no list in the envelope");
  }
  return std::make_pair(std::move(resource_version_), std::move(continue_));
}

}  // namespace tec::informers
