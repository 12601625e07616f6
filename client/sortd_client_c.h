/* A C interface to the C++ client's sort sessions (client/sortd_client.h,
 * SortClient::SortInSession), built as libsortd_client_c.so: for bindings in
 * other languages that want the C++ transfer path (raw parts over several
 * connections, straight from the caller's memory into the caller's output)
 * without a gRPC implementation of their own. The Python client loads it
 * with ctypes (client/python/sortd_client/native.py). Only the functions
 * below are exported; every call is thread-safe. */
#ifndef SORTD_CLIENT_SORTD_CLIENT_C_H_
#define SORTD_CLIENT_SORTD_CLIENT_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change to the structs or signatures below. */
#define SORTD_CLIENT_C_ABI_VERSION 3

typedef struct sortd_client sortd_client;

typedef struct {
  const char* target;      /* gRPC target, e.g. "localhost:50051" (required) */
  int connections;         /* per session; 0: as the server suggests */
  uint64_t part_bytes;     /* body bytes per part; 0: the client's default */
  int max_message_bytes;   /* 0: the client's default (64 MiB) */
  /* TLS (PEM files): all NULL for plaintext; client cert and key together. */
  const char* tls_root_certs_file;
  const char* tls_client_cert_file;
  const char* tls_client_key_file;
  /* 1: calls the server refused as busy come back at once (no retry). */
  int no_busy_retry;
} sortd_client_options;

/* phase: 0 upload, 1 sort, 2 download (bytes of that phase). */
typedef void (*sortd_progress_fn)(void* user, int phase, uint64_t done, uint64_t total);

typedef struct {
  int key_type;        /* sortd.v1.ElementType (1 uint32 ... 6 float64) */
  uint64_t count;
  const void* keys;    /* count elements, little-endian */
  void* keys_out;      /* count elements; may equal keys */
  int value_type;      /* 0: keys only */
  const void* values;
  void* values_out;    /* may equal values */
  uint64_t* indices_out; /* NULL: no permutation wanted */
  int descending;
  int transfer_only;   /* servers with --diagnostics: move the bytes, no sort */
  int connections;     /* 0: the client's */
  double timeout_seconds; /* per RPC of the session; <= 0: none */
  sortd_progress_fn progress; /* may be NULL; called from transfer threads */
  void* progress_user;
  const char* request_id; /* may be NULL */
  /* The sorted keys as delta-coded blocks (docs/api.md, "Compressed
   * downloads"): 0 as the client's compress_min_bytes says (asked from
   * 1 MiB of keys; the server grants it where it pays), 1 always, 2 never. */
  int compress_keys;
} sortd_session_sort;

int sortd_client_abi_version(void);

/* A client, or NULL with a message in error (error_len bytes, NUL-ended). */
sortd_client* sortd_client_open(const sortd_client_options* options, char* error,
                                size_t error_len);

/* One sort session. Returns 0 (OK) or a gRPC status code with the message
 * in error; *engine (may be NULL) receives the sortd.v1.Engine value. */
int sortd_client_sort_session(sortd_client* client, const sortd_session_sort* sort, int* engine,
                              char* error, size_t error_len);

void sortd_client_close(sortd_client* client);

#ifdef __cplusplus
}
#endif

#endif /* SORTD_CLIENT_SORTD_CLIENT_C_H_ */
