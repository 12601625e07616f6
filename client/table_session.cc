// SortClient::SortTable: one SortTable message, or a table session
// (docs/api.md, "Table sessions") for tables of fixed-width columns from
// session_min_bytes on or too large for one message. The session's parts go
// out from the request's own arrays and come back into the response's.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/sortd_client.h"

namespace sortd::client {
namespace {

// A fixed-width column as a session carries it: its element type, width,
// bytes and (times) unit; type UNSPECIFIED for byte strings or no array.
struct RawColumn {
  v1::ElementType type = v1::ELEMENT_TYPE_UNSPECIFIED;
  size_t width = 0;
  const uint8_t* data = nullptr;
  size_t count = 0;
  v1::TimeUnit unit = v1::TIME_UNIT_UNSPECIFIED;
};

template <typename Field>
RawColumn Numbers(v1::ElementType type, const Field& field) {
  return {type, sizeof(field.Get(0)), reinterpret_cast<const uint8_t*>(field.data()),
          static_cast<size_t>(field.size())};
}

RawColumn Narrow(v1::ElementType type, size_t width, const std::string& bytes) {
  return {type, width, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size() / width};
}

RawColumn RawOf(const v1::TypedArray& a) {
  switch (a.array_case()) {
    case v1::TypedArray::kUint32: return Numbers(v1::ELEMENT_TYPE_UINT32, a.uint32().values());
    case v1::TypedArray::kInt32: return Numbers(v1::ELEMENT_TYPE_INT32, a.int32().values());
    case v1::TypedArray::kFloat32: return Numbers(v1::ELEMENT_TYPE_FLOAT32, a.float32().values());
    case v1::TypedArray::kUint64: return Numbers(v1::ELEMENT_TYPE_UINT64, a.uint64().values());
    case v1::TypedArray::kInt64: return Numbers(v1::ELEMENT_TYPE_INT64, a.int64().values());
    case v1::TypedArray::kFloat64: return Numbers(v1::ELEMENT_TYPE_FLOAT64, a.float64().values());
    case v1::TypedArray::kInt8: return Narrow(v1::ELEMENT_TYPE_INT8, 1, a.int8().values());
    case v1::TypedArray::kUint8: return Narrow(v1::ELEMENT_TYPE_UINT8, 1, a.uint8().values());
    case v1::TypedArray::kInt16: return Narrow(v1::ELEMENT_TYPE_INT16, 2, a.int16().values());
    case v1::TypedArray::kUint16: return Narrow(v1::ELEMENT_TYPE_UINT16, 2, a.uint16().values());
    case v1::TypedArray::kFloat16: return Narrow(v1::ELEMENT_TYPE_FLOAT16, 2, a.float16().values());
    case v1::TypedArray::kBfloat16: return Narrow(v1::ELEMENT_TYPE_BFLOAT16, 2, a.bfloat16().values());
    case v1::TypedArray::kBoolean: return Narrow(v1::ELEMENT_TYPE_BOOL, 1, a.boolean().values());
    case v1::TypedArray::kDatetime64: {
      RawColumn c = Numbers(v1::ELEMENT_TYPE_DATETIME64, a.datetime64().values());
      c.unit = a.datetime64().unit();
      return c;
    }
    case v1::TypedArray::kTimedelta64: {
      RawColumn c = Numbers(v1::ELEMENT_TYPE_TIMEDELTA64, a.timedelta64().values());
      c.unit = a.timedelta64().unit();
      return c;
    }
    default: return {};  // byte strings, or no array
  }
}

template <typename Field>
uint8_t* Resized(Field* field, size_t count) {
  field->Resize(static_cast<int>(count), {});
  return reinterpret_cast<uint8_t*>(field->mutable_data());
}

uint8_t* ResizedBytes(std::string* bytes, size_t count) {
  bytes->resize(count);
  return reinterpret_cast<uint8_t*>(bytes->data());
}

// `out` set to the case of `in` with `count` elements; returns its bytes.
uint8_t* Shaped(const v1::TypedArray& in, size_t count, size_t width, v1::TypedArray* out) {
  switch (in.array_case()) {
    case v1::TypedArray::kUint32: return Resized(out->mutable_uint32()->mutable_values(), count);
    case v1::TypedArray::kInt32: return Resized(out->mutable_int32()->mutable_values(), count);
    case v1::TypedArray::kFloat32: return Resized(out->mutable_float32()->mutable_values(), count);
    case v1::TypedArray::kUint64: return Resized(out->mutable_uint64()->mutable_values(), count);
    case v1::TypedArray::kInt64: return Resized(out->mutable_int64()->mutable_values(), count);
    case v1::TypedArray::kFloat64: return Resized(out->mutable_float64()->mutable_values(), count);
    case v1::TypedArray::kInt8: return ResizedBytes(out->mutable_int8()->mutable_values(), count * width);
    case v1::TypedArray::kUint8: return ResizedBytes(out->mutable_uint8()->mutable_values(), count * width);
    case v1::TypedArray::kInt16: return ResizedBytes(out->mutable_int16()->mutable_values(), count * width);
    case v1::TypedArray::kUint16: return ResizedBytes(out->mutable_uint16()->mutable_values(), count * width);
    case v1::TypedArray::kFloat16: return ResizedBytes(out->mutable_float16()->mutable_values(), count * width);
    case v1::TypedArray::kBfloat16: return ResizedBytes(out->mutable_bfloat16()->mutable_values(), count * width);
    case v1::TypedArray::kBoolean: return ResizedBytes(out->mutable_boolean()->mutable_values(), count * width);
    case v1::TypedArray::kDatetime64:
      out->mutable_datetime64()->set_unit(in.datetime64().unit());
      return Resized(out->mutable_datetime64()->mutable_values(), count);
    case v1::TypedArray::kTimedelta64:
      out->mutable_timedelta64()->set_unit(in.timedelta64().unit());
      return Resized(out->mutable_timedelta64()->mutable_values(), count);
    default: return nullptr;
  }
}

// Whether a refused table session came from a server older than them,
// which reads the start as a plain session without key_type.
bool NoTableSessions(const absl::Status& status) {
  return absl::IsInvalidArgument(status) &&
         status.message().find("key_type: must be set") != absl::string_view::npos;
}

}  // namespace

absl::StatusOr<v1::SortTableResponse> SortClient::SortTable(const v1::SortTableRequest& request) {
  // Fixed-width tables from session_min_bytes on, or past the message
  // limit, go as a table session.
  // A table naming regions is one message: its columns lie on the server.
  bool fixed = request.columns_size() > 0 && !request.has_indices_region();
  size_t bytes = 0;
  for (const v1::TableColumn& column : request.columns()) {
    const RawColumn raw = RawOf(column.values());
    fixed = fixed && raw.type != v1::ELEMENT_TYPE_UNSPECIFIED && !column.has_values_region() &&
            !column.has_validity_region();
    bytes += raw.count * raw.width + column.validity().size();
  }
  const bool too_large = request.ByteSizeLong() + 1024 > static_cast<size_t>(options_.max_message_bytes);
  if (fixed && (too_large || UsesSession(bytes))) {
    absl::StatusOr<v1::SortTableResponse> response = SortTableInSession(request);
    if (response.ok() || too_large || !NoTableSessions(response.status())) return response;
  }
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  v1::SortTableResponse response;
  grpc::Status rpc = stub_->SortTable(&ctx, request, &response);
  if (!rpc.ok()) return FromGrpcStatus(rpc);
  return response;
}

absl::StatusOr<v1::SortTableResponse> SortClient::SortTableInSession(
    const v1::SortTableRequest& request) {
  const size_t rows = RawOf(request.columns(0).values()).count;
  v1::StartSortSessionRequest start;
  start.set_total_keys(rows);
  start.set_request_id(request.request_id());
  start.set_return_columns(request.return_columns());
  *start.mutable_by() = request.by();
  v1::SortTableResponse response;
  response.set_request_id(request.request_id());
  std::vector<ArrayPlan> uploads, downloads;
  // The permutation straight into the response.
  downloads.push_back({v1::SESSION_ARRAY_INDICES, 8, nullptr,
                       Resized(response.mutable_indices(), rows)});
  for (int c = 0; c < request.columns_size(); ++c) {
    const v1::TableColumn& column = request.columns(c);
    const RawColumn raw = RawOf(column.values());
    if (raw.count != rows) {
      return absl::InvalidArgumentError(absl::StrCat("columns[", c, "]: ", raw.count,
                                                     " rows, but columns[0] has ", rows));
    }
    const size_t bitmap = (rows + 7) / 8;
    const bool has_validity = !column.validity().empty();
    if (has_validity && column.validity().size() < bitmap) {
      return absl::InvalidArgumentError(absl::StrCat("columns[", c, "].validity: ",
                                                     column.validity().size(), " bytes for ", rows,
                                                     " rows (needs ", bitmap, ")"));
    }
    v1::SessionColumn* spec = start.add_columns();
    spec->set_name(column.name());
    spec->set_type(raw.type);
    spec->set_unit(raw.unit);
    spec->set_has_validity(has_validity);
    const uint32_t index = static_cast<uint32_t>(c);
    uploads.push_back({v1::SESSION_ARRAY_COLUMN, raw.width, raw.data, nullptr, rows, index});
    if (has_validity) {
      uploads.push_back({v1::SESSION_ARRAY_VALIDITY, 1,
                         reinterpret_cast<const uint8_t*>(column.validity().data()), nullptr, bitmap,
                         index});
    }
    if (!request.return_columns()) continue;
    v1::TableColumn* out = response.add_columns();
    out->set_name(column.name());
    downloads.push_back({v1::SESSION_ARRAY_COLUMN, raw.width, nullptr,
                         Shaped(column.values(), rows, raw.width, out->mutable_values()), rows, index});
    if (has_validity) {
      downloads.push_back({v1::SESSION_ARRAY_VALIDITY, 1, nullptr,
                           ResizedBytes(out->mutable_validity(), bitmap), bitmap, index});
    }
  }
  absl::StatusOr<v1::FinishSortSessionResponse> finished =
      RunSession(start, uploads, downloads, 0, options_.timeout, options_.progress);
  if (!finished.ok()) return finished.status();
  response.set_engine(finished->engine());
  return response;
}

}  // namespace sortd::client
