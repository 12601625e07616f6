// Keeps a client's shared memory from crashing the server. A system region
// is the client's shm object mapped here: if the client shrinks the object
// (ftruncate) while it is registered, any access past the new end raises
// SIGBUS in the server. The guard, installed once, catches SIGBUS at an
// address inside a guarded mapping, maps anonymous zero pages over that
// mapping so that the faulting access and the rest of the sort complete on
// throwaway memory, and marks the mapping broken (once: a second fault
// there is not the client's doing); the request then fails
// and the region is refused from then on. SIGBUS anywhere else still kills
// the process, as it would without the guard. (Wayland compositors guard
// client shm buffers the same way: wl_shm_buffer_begin_access.)
#ifndef SORTD_SERVER_REGIONS_MAPPING_GUARD_H_
#define SORTD_SERVER_REGIONS_MAPPING_GUARD_H_

#include <cstddef>

namespace sortd {

// Most mappings guarded at once (--max_shm_regions is capped to it).
inline constexpr int kMaxGuardedMappings = 1024;

// Installs the SIGBUS handler (idempotent, thread-safe); false when the
// system refused it (regions must then not be mapped).
bool InstallMappingGuard();

// Guards [start, start + bytes) (page aligned); returns a slot, or -1 when
// every slot is taken. The mapping must stay until UnguardMapping(slot).
int GuardMapping(void* start, size_t bytes);
void UnguardMapping(int slot);

// Whether SIGBUS hit the mapping (its contents are then zero pages).
bool MappingBroken(int slot);

}  // namespace sortd

#endif  // SORTD_SERVER_REGIONS_MAPPING_GUARD_H_
