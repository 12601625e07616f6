// Fuzzer of sort-session uploads: arbitrary UploadParts messages (raw bytes,
// split over several gRPC slices, or well-formed parts with arbitrary
// fields) into one session, then finish, sort and download. Every part is
// accepted or refused with INVALID_ARGUMENT / ALREADY_EXISTS naming the
// field; a part is refused ALREADY_EXISTS exactly when it overlaps elements
// accepted before; accepted parts land where they say (a shadow copy holds
// the same bytes); finish succeeds exactly when every element arrived; the
// sorted keys (and values, indices) match the reference sort of the shadow;
// and admission is back to zero once the session is gone.
//
// Input: byte 0 picks the key and value types (0xF0 and above: a table
// session, RunTable says how), byte 1 the key count (0-63)
// and order and whether indices are wanted; then records: a flag byte
// (bit 0: raw bytes, else a built part; bits 1-2: slices), a 2-byte
// little-endian length, and that many bytes.
#include <grpcpp/grpcpp.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dispatcher.h"
#include "server/runtime/admission.h"
#include "server/sessions/session_store.h"
#include "server/wire/session_spec.h"
#include "sortd/v1/session_part_codec.h"
#include "sortd/v1/sorted_blocks.h"
#include "tests/fuzz/fuzz_oracle.h"
#include "tests/fuzz/table_oracle.h"

namespace sortd::fuzz {
namespace {

namespace part = v1::session_part;

constexpr v1::ElementType kKeyTypes[] = {v1::ELEMENT_TYPE_UINT32, v1::ELEMENT_TYPE_INT32,
                                         v1::ELEMENT_TYPE_FLOAT32, v1::ELEMENT_TYPE_UINT64,
                                         v1::ELEMENT_TYPE_INT64, v1::ELEMENT_TYPE_FLOAT64};

// The message as gRPC might hand it over: cut into up to 3 slices.
grpc::ByteBuffer Sliced(const uint8_t* data, size_t size, int slices) {
  std::vector<grpc::Slice> parts;
  size_t at = 0;
  for (int i = 0; i < slices; ++i) {
    const size_t end = i + 1 == slices ? size : std::min(size, at + size / slices);
    parts.emplace_back(data + at, end - at);
    at = end;
  }
  return grpc::ByteBuffer(parts.data(), parts.size());
}

// One input record: a flag byte, a 2-byte little-endian length, the bytes.
struct Record {
  uint8_t flags = 0;
  const uint8_t* bytes = nullptr;
  size_t length = 0;
};

// Takes the next record off the input (a short one keeps what is left).
bool NextRecord(const uint8_t*& data, size_t& size, Record* record) {
  if (size < 3) return false;
  record->flags = data[0];
  record->length = std::min<size_t>(data[1] | (size_t{data[2]} << 8), size - 3);
  record->bytes = data + 3;
  data += 3 + record->length;
  size -= 3 + record->length;
  return true;
}

// A well-formed part with `header` and `body`, cut into `slices` slices
// over `storage` (which must outlive the message).
grpc::ByteBuffer BuiltPart(const part::Header& header, const uint8_t* body, size_t length,
                           int slices, std::string* storage) {
  grpc::ByteBuffer message = part::Encode(header, body, length, [](void*) {}, nullptr);
  grpc::Slice whole;
  message.DumpToSingleSlice(&whole);
  storage->assign(reinterpret_cast<const char*>(whole.begin()), whole.size());
  return Sliced(reinterpret_cast<const uint8_t*>(storage->data()), storage->size(), slices);
}

// Elements received so far per array, and the bytes they hold.
struct Shadow {
  std::vector<uint8_t> bytes;
  std::vector<bool> got;
  bool Overlaps(uint64_t begin, uint64_t end) const {
    for (uint64_t i = begin; i < end; ++i) {
      if (got[i]) return true;
    }
    return false;
  }
};

template <typename T>
void CheckSorted(const Shadow& keys, const Shadow* values, size_t value_width, size_t n,
                 SortOrder order, const SortSession& session, bool with_indices) {
  std::vector<T> input(n);
  if (n > 0) std::memcpy(input.data(), keys.bytes.data(), n * sizeof(T));
  const std::vector<uint64_t> perm = ReferencePermutation(input, order);
  auto keys_out = session.DownloadRange(v1::SESSION_ARRAY_KEYS, 0, 0, 0);
  Check(keys_out.ok(), "DownloadRange(keys): " + keys_out.status().ToString());
  for (size_t i = 0; i < n; ++i) {
    Check(std::memcmp(keys_out->data + i * sizeof(T), &input[perm[i]], sizeof(T)) == 0,
          "sorted keys differ from the reference");
  }
  if (values != nullptr) {
    auto values_out = session.DownloadRange(v1::SESSION_ARRAY_VALUES, 0, 0, 0);
    Check(values_out.ok(), "DownloadRange(values): " + values_out.status().ToString());
    for (size_t i = 0; i < n; ++i) {
      Check(std::memcmp(values_out->data + i * value_width,
                        values->bytes.data() + perm[i] * value_width, value_width) == 0,
            "a value did not follow its key");
    }
  }
  if (with_indices) {
    auto indices = session.DownloadRange(v1::SESSION_ARRAY_INDICES, 0, 0, 0);
    Check(indices.ok(), "DownloadRange(indices): " + indices.status().ToString());
    for (size_t i = 0; i < n; ++i) {
      uint64_t index = 0;
      std::memcpy(&index, indices->data + i * 8, 8);
      Check(index == perm[i], "indices differ from the reference permutation");
    }
  }
}

// A session started with key_encoding DELTA_BLOCKS: the CPU engine leaves
// the keys as they are (no coded body), and the blocks the download
// encodes from them decode to the same keys.
template <typename T>
void CheckCodedKeys(const SortSession& session, SortOrder order) {
  auto keys_out = session.DownloadRange(v1::SESSION_ARRAY_KEYS, 0, 0, 0);
  Check(keys_out.ok(), "DownloadRange(keys): " + keys_out.status().ToString());
  Check(!session.CodedKeys(*keys_out).has_value(), "the CPU engine reported coded keys");
  const size_t n = keys_out->count;
  v1::blocks::KeyCoding coding;
  coding.width = sizeof(T);
  coding.kind = std::is_floating_point_v<T> ? v1::blocks::KeyCoding::Kind::kFloat
                : std::is_signed_v<T>       ? v1::blocks::KeyCoding::Kind::kSigned
                                            : v1::blocks::KeyCoding::Kind::kUnsigned;
  coding.descending = order == SortOrder::kDescending;
  std::vector<uint8_t> body(v1::blocks::MaxEncodedBytes(n, sizeof(T)));
  body.resize(v1::blocks::EncodeBlocks(keys_out->data, n, coding, body.data()));
  std::vector<T> back(n);
  const absl::Status decoded =
      v1::blocks::DecodeBlocks(body.data(), body.size(), coding, 0, n, back.data());
  Check(decoded.ok(), "DecodeBlocks of the session's keys: " + decoded.ToString());
  Check(n == 0 || std::memcmp(back.data(), keys_out->data, n * sizeof(T)) == 0,
        "coded keys decoded to different keys");
}

// A table session's column types, with their element widths.
struct ColumnType {
  v1::ElementType type;
  size_t width;
};
constexpr ColumnType kColumnTypes[] = {
    {v1::ELEMENT_TYPE_UINT32, 4},     {v1::ELEMENT_TYPE_INT32, 4},     {v1::ELEMENT_TYPE_FLOAT32, 4},
    {v1::ELEMENT_TYPE_UINT64, 8},     {v1::ELEMENT_TYPE_INT64, 8},     {v1::ELEMENT_TYPE_FLOAT64, 8},
    {v1::ELEMENT_TYPE_INT8, 1},       {v1::ELEMENT_TYPE_UINT8, 1},     {v1::ELEMENT_TYPE_INT16, 2},
    {v1::ELEMENT_TYPE_UINT16, 2},     {v1::ELEMENT_TYPE_FLOAT16, 2},   {v1::ELEMENT_TYPE_BFLOAT16, 2},
    {v1::ELEMENT_TYPE_BOOL, 1},       {v1::ELEMENT_TYPE_DATETIME64, 8}, {v1::ELEMENT_TYPE_TIMEDELTA64, 8}};

// The column as one SortTable message would carry it (for the reference).
v1::TableColumn AsTableColumn(v1::ElementType type, const Shadow& values, const Shadow* bitmap) {
  v1::TableColumn column;
  v1::TypedArray* a = column.mutable_values();
  const std::string bytes(values.bytes.begin(), values.bytes.end());
  auto numbers = [&](auto* field) {
    using T = std::decay_t<decltype(field->Get(0))>;
    field->Resize(static_cast<int>(bytes.size() / sizeof(T)), T());
    if (!bytes.empty()) std::memcpy(field->mutable_data(), bytes.data(), bytes.size());
  };
  switch (type) {
    case v1::ELEMENT_TYPE_UINT32: numbers(a->mutable_uint32()->mutable_values()); break;
    case v1::ELEMENT_TYPE_INT32: numbers(a->mutable_int32()->mutable_values()); break;
    case v1::ELEMENT_TYPE_FLOAT32: numbers(a->mutable_float32()->mutable_values()); break;
    case v1::ELEMENT_TYPE_UINT64: numbers(a->mutable_uint64()->mutable_values()); break;
    case v1::ELEMENT_TYPE_INT64: numbers(a->mutable_int64()->mutable_values()); break;
    case v1::ELEMENT_TYPE_FLOAT64: numbers(a->mutable_float64()->mutable_values()); break;
    case v1::ELEMENT_TYPE_INT8: a->mutable_int8()->set_values(bytes); break;
    case v1::ELEMENT_TYPE_UINT8: a->mutable_uint8()->set_values(bytes); break;
    case v1::ELEMENT_TYPE_INT16: a->mutable_int16()->set_values(bytes); break;
    case v1::ELEMENT_TYPE_UINT16: a->mutable_uint16()->set_values(bytes); break;
    case v1::ELEMENT_TYPE_FLOAT16: a->mutable_float16()->set_values(bytes); break;
    case v1::ELEMENT_TYPE_BFLOAT16: a->mutable_bfloat16()->set_values(bytes); break;
    case v1::ELEMENT_TYPE_BOOL: a->mutable_boolean()->set_values(bytes); break;
    case v1::ELEMENT_TYPE_DATETIME64:
      numbers(a->mutable_datetime64()->mutable_values());
      a->mutable_datetime64()->set_unit(v1::TIME_UNIT_SECOND);
      break;
    default:
      numbers(a->mutable_timedelta64()->mutable_values());
      a->mutable_timedelta64()->set_unit(v1::TIME_UNIT_SECOND);
      break;
  }
  if (bitmap != nullptr) column.set_validity(std::string(bitmap->bytes.begin(), bitmap->bytes.end()));
  return column;
}

// Table sessions: byte 1 the row count (0-63), return_columns (bit 6) and
// without_permutation (bit 7: the permutation's download is refused, and
// a one-column table may be sorted as keys alone); byte 2
// the columns (1-3), then a byte per column (bits 0-3: the type, bit 4: a
// bitmap), a key count byte (1-3), a byte per key (bits 0-1: the column,
// bit 4: descending, bit 5: nulls first); then records as for arrays, a
// built part's first byte picking the array (% 6) and column (/ 6 % 4).
// Accepted parts land where they say; finish succeeds exactly when every
// column and bitmap arrived; the permutation is the reference table order
// of the shadow (tests/fuzz/table_oracle.h) unless a bool byte is not 0 or
// 1 (INVALID_ARGUMENT), and the returned columns are the shadow reordered.
void RunTable(const uint8_t* data, size_t size) {
  if (size < 3) return;
  const size_t n = data[1] % 64;
  const bool return_columns = data[1] & 64;
  const bool without_permutation = data[1] & 128;
  const int ncolumns = 1 + data[2] % 3;
  data += 3;
  size -= 3;
  if (size < static_cast<size_t>(ncolumns) + 1) return;
  v1::StartSortSessionRequest start;
  start.set_total_keys(n);
  start.set_return_columns(return_columns);
  start.set_without_permutation(without_permutation);
  std::vector<ColumnType> types;
  for (int c = 0; c < ncolumns; ++c) {
    const ColumnType type = kColumnTypes[(data[c] & 15) % 15];
    types.push_back(type);
    v1::SessionColumn* column = start.add_columns();
    column->set_type(type.type);
    column->set_has_validity(data[c] & 16);
    if (type.type == v1::ELEMENT_TYPE_DATETIME64 || type.type == v1::ELEMENT_TYPE_TIMEDELTA64) {
      column->set_unit(v1::TIME_UNIT_SECOND);
    }
  }
  const int nkeys = 1 + data[ncolumns] % 3;
  data += ncolumns + 1;
  size -= ncolumns + 1;
  if (size < static_cast<size_t>(nkeys)) return;
  for (int k = 0; k < nkeys; ++k) {
    v1::SortKey* key = start.add_by();
    key->set_column(data[k] % ncolumns);
    key->set_order(data[k] & 16 ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);
    key->set_nulls(data[k] & 32 ? v1::NULL_PLACEMENT_FIRST : v1::NULL_PLACEMENT_LAST);
  }
  data += nkeys;
  size -= nkeys;

  AdmissionControl admission(uint64_t{1} << 20, 16);
  {
    SessionLimits limits;
    limits.max_part_bytes = 256;
    SessionStore store(limits, &admission, nullptr);
    auto spec = SessionSpecFromProto(start);
    Check(spec.ok(), "SessionSpecFromProto (table): " + spec.status().ToString());
    auto started = store.Start(*spec);
    Check(started.ok(), "Start (table): " + started.status().ToString());
    SortSession& session = **started;
    const size_t bitmap_bytes = (n + 7) / 8;
    // Slots 2c: column c's elements, 2c + 1: its bitmap's bytes.
    std::vector<Shadow> shadows;
    for (int c = 0; c < ncolumns; ++c) {
      shadows.push_back({std::vector<uint8_t>(n * types[c].width), std::vector<bool>(n)});
      const size_t bits = start.columns(c).has_validity() ? bitmap_bytes : 0;
      shadows.push_back({std::vector<uint8_t>(bits), std::vector<bool>(bits)});
    }
    Record rec;
    while (NextRecord(data, size, &rec)) {
      if (rec.length < 2) continue;
      const uint8_t* record = rec.bytes;
      std::string built;
      part::Header header;
      header.array = record[0] % 6;
      header.column = (record[0] / 6) % 4;
      header.offset = record[1] % 72;
      grpc::ByteBuffer message = BuiltPart(header, record + 2, rec.length - 2, 1 + (rec.flags >> 1) % 3, &built);
      const uint64_t message_bytes = message.Length();
      part::Reader reader(&message);
      part::Header got;
      if (!reader.Start(&got)) continue;
      const uint64_t body = reader.body_bytes();
      const absl::Status accepted =
          session.AcceptPart(reader, got, message_bytes, limits.max_part_bytes).status();
      const bool column_array = got.array == v1::SESSION_ARRAY_COLUMN || got.array == v1::SESSION_ARRAY_VALIDITY;
      const bool known = column_array && got.column < static_cast<uint32_t>(ncolumns);
      const int slot = known ? 2 * static_cast<int>(got.column) + (got.array == v1::SESSION_ARRAY_VALIDITY) : -1;
      const size_t width = got.array == v1::SESSION_ARRAY_COLUMN && known ? types[got.column].width : 1;
      const size_t length_of = slot >= 0 ? shadows[slot].got.size() : 0;
      if (!accepted.ok()) {
        CheckRefusal(accepted, "AcceptPart (table)",
                     {absl::StatusCode::kInvalidArgument, absl::StatusCode::kAlreadyExists});
        if (accepted.code() == absl::StatusCode::kAlreadyExists) {
          Check(slot >= 0 && body % width == 0 && got.offset + body / width <= length_of &&
                    shadows[slot].Overlaps(got.offset, got.offset + body / width),
                "ALREADY_EXISTS for a table part that overlaps nothing received");
        }
        continue;
      }
      Check(slot >= 0 && (got.array == v1::SESSION_ARRAY_COLUMN || start.columns(got.column).has_validity()),
            "accepted a part of an array the table session does not upload");
      Check(body > 0 && body % width == 0, "accepted a table part of partial elements");
      const uint64_t count = body / width;
      Check(got.offset + count <= length_of, "accepted a table part past its array");
      Check(!shadows[slot].Overlaps(got.offset, got.offset + count),
            "accepted a table part overlapping elements already received");
      std::memcpy(shadows[slot].bytes.data() + got.offset * width, record + 2, body);
      for (uint64_t i = got.offset; i < got.offset + count; ++i) shadows[slot].got[i] = true;
    }
    bool complete = true;
    for (const Shadow& shadow : shadows) {
      for (bool g : shadow.got) complete = complete && g;
    }
    const absl::StatusOr<bool> begun = session.BeginSort();
    Check(begun.ok() == complete, "BeginSort (table): " + begun.status().ToString() +
                                      (complete ? " with every column received"
                                                : " accepted with elements missing"));
    if (begun.ok()) {
      bool bad_bool = false;
      for (int c = 0; c < ncolumns; ++c) {
        if (types[c].type != v1::ELEMENT_TYPE_BOOL) continue;
        for (uint8_t b : shadows[2 * c].bytes) bad_bool = bad_bool || b > 1;
      }
      const absl::Status sorted = session.RunSort(CpuDispatcher());
      if (bad_bool) {
        Check(sorted.code() == absl::StatusCode::kInvalidArgument,
              "a bool byte other than 0 or 1 was sorted: " + sorted.ToString());
      } else {
        Check(sorted.ok(), "RunSort (table): " + sorted.ToString());
        v1::SortTableRequest reference;
        for (int c = 0; c < ncolumns; ++c) {
          *reference.add_columns() = AsTableColumn(
              types[c].type, shadows[2 * c], start.columns(c).has_validity() ? &shadows[2 * c + 1] : nullptr);
        }
        *reference.mutable_by() = start.by();
        const std::vector<uint64_t> perm = TablePermutation(reference);
        auto indices = session.DownloadRange(v1::SESSION_ARRAY_INDICES, 0, 0, 0);
        Check(indices.ok() != without_permutation,
              "the permutation's download refused, or allowed without_permutation: " +
                  indices.status().ToString());
        for (size_t i = 0; i < n && indices.ok(); ++i) {
          uint64_t index = 0;
          std::memcpy(&index, indices->data + i * 8, 8);
          Check(index == perm[i], "table session permutation differs from the reference order");
        }
        for (int c = 0; c < ncolumns; ++c) {
          auto out = session.DownloadRange(v1::SESSION_ARRAY_COLUMN, c, 0, 0);
          Check(out.ok() == return_columns, "column download without return_columns, or refused with it");
          if (!out.ok()) continue;
          const size_t w = types[c].width;
          for (size_t i = 0; i < n; ++i) {
            Check(std::memcmp(out->data + i * w, shadows[2 * c].bytes.data() + perm[i] * w, w) == 0,
                  "a reordered column differs from the shadow reordered");
          }
          if (!start.columns(c).has_validity()) continue;
          auto bits = session.DownloadRange(v1::SESSION_ARRAY_VALIDITY, c, 0, 0);
          Check(bits.ok(), "bitmap download: " + bits.status().ToString());
          for (size_t i = 0; i < n; ++i) {
            const int want = (shadows[2 * c + 1].bytes[perm[i] / 8] >> (perm[i] % 8)) & 1;
            Check(((bits->data[i / 8] >> (i % 8)) & 1) == want, "a reordered bitmap bit differs");
          }
        }
      }
    }
    Check(store.End(session.id()).ok(), "End of an open table session failed");
  }
  Check(admission.inflight_bytes() == 0 && admission.inflight_requests() == 0,
        "admission not back to zero after the table session ended");
}

void Run(const uint8_t* data, size_t size) {
  if (size < 2) return;
  if (data[0] >= 0xF0) {
    RunTable(data, size);
    return;
  }
  const v1::ElementType key_type = kKeyTypes[data[0] % 6];
  const int value_pick = (data[0] / 6) % 7;  // 6: no values
  const v1::ElementType value_type =
      value_pick == 6 ? v1::ELEMENT_TYPE_UNSPECIFIED : kKeyTypes[value_pick];
  const bool coded_keys = (data[0] / 42) & 1;  // key_encoding DELTA_BLOCKS
  const size_t n = data[1] % 64;
  const bool descending = data[1] & 64;
  const bool with_indices = data[1] & 128;
  data += 2;
  size -= 2;

  AdmissionControl admission(uint64_t{1} << 20, 16);
  {
    SessionLimits limits;
    limits.max_part_bytes = 256;
    SessionStore store(limits, &admission, nullptr);
    v1::StartSortSessionRequest start;
    start.set_key_type(key_type);
    start.set_value_type(value_type);
    start.set_total_keys(n);
    start.set_order(descending ? v1::SORT_ORDER_DESCENDING : v1::SORT_ORDER_ASCENDING);
    start.set_return_indices(with_indices);
    if (coded_keys) start.set_key_encoding(v1::PART_ENCODING_DELTA_BLOCKS);
    auto spec = SessionSpecFromProto(start);
    Check(spec.ok(), "SessionSpecFromProto: " + spec.status().ToString());
    auto started = store.Start(*spec);
    Check(started.ok(), "Start: " + started.status().ToString());
    SortSession& session = **started;
    const size_t key_width = ElementSize(session.key_type());
    const size_t value_width =
        value_type == v1::ELEMENT_TYPE_UNSPECIFIED ? 0 : (value_pick < 3 ? 4 : 8);
    Shadow shadows[2];
    shadows[0] = {std::vector<uint8_t>(n * key_width), std::vector<bool>(n)};
    shadows[1] = {std::vector<uint8_t>(n * value_width), std::vector<bool>(n)};

    Record rec;
    while (NextRecord(data, size, &rec)) {
      const uint8_t* record = rec.bytes;
      const size_t length = rec.length;
      std::string built;
      grpc::ByteBuffer message;
      const int slices = 1 + (rec.flags >> 1) % 3;
      if (rec.flags & 1) {
        message = Sliced(record, length, slices);
      } else {
        // A well-formed part: array, offset, then the rest as the body.
        if (length < 2) continue;
        part::Header header;
        header.array = record[0] % 4;
        header.offset = record[1] % 72;
        message = BuiltPart(header, record + 2, length - 2, slices, &built);
      }
      const uint64_t message_bytes = message.Length();
      // The message's bytes, for the oracle (before the reader consumes it).
      grpc::Slice copy;
      message.DumpToSingleSlice(&copy);
      part::Reader reader(&message);
      part::Header header;
      if (!reader.Start(&header)) continue;  // the reactor refuses it, naming the message
      const uint64_t body = reader.body_bytes();
      const uint8_t* body_bytes = copy.begin() + (copy.size() - std::min<uint64_t>(copy.size(), body));
      const absl::Status accepted =
          session.AcceptPart(reader, header, message_bytes, limits.max_part_bytes).status();
      const int which = header.array == v1::SESSION_ARRAY_KEYS ? 0 : 1;
      const size_t width = which == 0 ? key_width : value_width;
      if (!accepted.ok()) {
        CheckRefusal(accepted, "AcceptPart",
                     {absl::StatusCode::kInvalidArgument, absl::StatusCode::kAlreadyExists});
        if (accepted.code() == absl::StatusCode::kAlreadyExists) {
          Check(width > 0 && body % width == 0 && header.offset + body / width <= n &&
                    shadows[which].Overlaps(header.offset, header.offset + body / width),
                "ALREADY_EXISTS for a part that overlaps nothing received");
        }
        continue;
      }
      Check(header.array == v1::SESSION_ARRAY_KEYS ||
                (header.array == v1::SESSION_ARRAY_VALUES && value_width > 0),
            "accepted a part of an array the session does not upload");
      Check(width > 0 && body > 0 && body % width == 0, "accepted a part of partial elements");
      const uint64_t count = body / width;
      Check(header.offset + count <= n, "accepted a part past total_keys");
      Check(!shadows[which].Overlaps(header.offset, header.offset + count),
            "accepted a part overlapping elements already received");
      std::memcpy(shadows[which].bytes.data() + header.offset * width, body_bytes, body);
      for (uint64_t i = header.offset; i < header.offset + count; ++i) shadows[which].got[i] = true;
    }

    bool complete = true;
    for (size_t i = 0; i < n; ++i) {
      complete = complete && shadows[0].got[i] && (value_width == 0 || shadows[1].got[i]);
    }
    const absl::StatusOr<bool> begun = session.BeginSort();
    Check(begun.ok() == complete, "BeginSort: " + begun.status().ToString() +
                                      (complete ? " with every element received"
                                                : " accepted with elements missing"));
    if (begun.ok()) {
      const absl::Status sorted = session.RunSort(CpuDispatcher());
      Check(sorted.ok(), "RunSort: " + sorted.ToString());
      const SortOrder order = descending ? SortOrder::kDescending : SortOrder::kAscending;
      const Shadow* values = value_width > 0 ? &shadows[1] : nullptr;
      VisitNumeric(session.key_type(), [&](auto zero) {
        using T = decltype(zero);
        CheckSorted<T>(shadows[0], values, value_width, n, order, session, with_indices);
        if (coded_keys) CheckCodedKeys<T>(session, order);
      });
    }
    Check(store.End(session.id()).ok(), "End of an open session failed");
  }
  Check(admission.inflight_bytes() == 0 && admission.inflight_requests() == 0,
        "admission not back to zero after the session ended");
}

}  // namespace
}  // namespace sortd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sortd::fuzz::Run(data, size);
  return 0;
}
