/* The pure part of the GPU-time injection library: a process's busy time per GPU as the union of its
 * activity intervals (kernels, copies, fills), and the state file the agent reads. No CUDA, no CUPTI:
 * compiled alone for the tests (tests/agent/test_gputime_core.py drives it through ctypes). */
#ifndef FLEETWATT_GPUTIME_CORE_H
#define FLEETWATT_GPUTIME_CORE_H

#include <stddef.h>
#include <stdint.h>

#define FW_MAX_DEVICES 64
#define FW_UUID_LEN 48
#define FW_KERNEL_SLOTS 256 /* distinct kernels kept per device; more are counted as one "other" */
#define FW_KERNELS_SHOWN 16 /* the busiest, in the state file */
#define FW_RING 512          /* bins of busy time kept per device (5.12 s of 10 ms bins) */
#define FW_BINS_SHOWN 300    /* the last bins, in the state file (3 s of 10 ms bins) */
/* A stretch of busy time shorter than this cannot have held another context's time slice (a switch out
 * and back alone takes longer): the agent keeps such time whole where processes' claims overlap. */
#define FW_SHORT_NS 20000ull

typedef struct {
    uint64_t start;
    uint64_t end;
} fw_interval;

/* One kernel (by a hash of its name, never the name) and the time its launches ran, summed (not their
 * union): what the process's work is made of, so that the power of a kernel seen in one job can be
 * known in another. */
typedef struct {
    uint64_t id; /* 0: empty slot */
    uint64_t busy_ns;
    uint64_t count;
} fw_kernel;

/* One GPU as this process sees it. Intervals still open to late records are kept sorted and disjoint
 * (`n_open` of them from `open + open_off`); those that ended more than `horizon_ns` before the newest
 * end are committed (their length added to `committed_ns`, their end to `committed_until`) and dropped
 * from the front. A record that arrives after its time was committed counts only past
 * `committed_until`: never twice. A launch-bound process keeps a second's worth of intervals open
 * (100,000 or more): a batch is merged with the open intervals it can touch only (records come
 * nearly in time order, so mostly none), and dropping from the front moves no memory but now and
 * then, so that a record costs the same however many are open. */
typedef struct {
    int used;
    char uuid[FW_UUID_LEN];
    uint64_t committed_ns;
    uint64_t committed_until;
    fw_interval *open;
    size_t open_off; /* the first open interval: open[open_off] */
    size_t n_open;
    size_t cap_open;
    uint64_t records;
    uint64_t late_clipped_ns; /* time of late records already committed (not counted again) */
    fw_kernel kernels[FW_KERNEL_SLOTS];
    uint64_t other_kernels_ns; /* launches of kernels past the table's room */
    /* Busy time per bin of CLOCK_REALTIME (bin = t / bin_ns): the committed union's, by absolute bin
     * number (ring_bin says which bin a slot holds). The open intervals are added when the bins are
     * written. Several processes' bins line up, so the agent can share time they all claim. */
    uint32_t ring_us[FW_RING];
    uint32_t ring_short_us[FW_RING]; /* of which in stretches shorter than FW_SHORT_NS */
    uint64_t ring_bin[FW_RING];
    /* Time not traced (fw_estimate: a launch-bound process traced in windows), counted at the busy
     * share of the window before it: in busy_ns and the bins, and said apart. */
    uint64_t estimated_ns;
} fw_device;

typedef struct {
    fw_device devices[FW_MAX_DEVICES];
    uint64_t horizon_ns;
    uint64_t bin_ns; /* 0: no bins */
    fw_interval *scratch;
    size_t cap_scratch;
} fw_state;

void fw_state_init(fw_state *s, uint64_t horizon_ns);
void fw_set_bins(fw_state *s, uint64_t bin_ns); /* keep busy time per bin of this width (10 ms) */
size_t fw_state_size(void); /* sizeof(fw_state), for callers that cannot see the struct (the tests) */
void fw_state_free(fw_state *s);

/* Add a batch of one device's intervals (any order; start > end is ignored). 0, or -1 out of memory
 * (the batch is then counted by the clip rule alone: no time counted twice, some possibly lost). */
int fw_add(fw_state *s, unsigned device, const fw_interval *batch, size_t n);

/* Busy nanoseconds of a device so far: committed + the open intervals' lengths. */
uint64_t fw_busy_ns(const fw_state *s, unsigned device);

/* Busy ns (and of them in stretches shorter than FW_SHORT_NS) of a device within [a, b) of the clock:
 * the open intervals exactly, committed time from its bins (pro rata where a bin is cut). */
void fw_busy_between(const fw_state *s, unsigned device, uint64_t a, uint64_t b, uint64_t *busy, uint64_t *short_ns);

/* Count [a, b) of the clock, not traced, as busy at `share` (0..1) of it, `short_share` of it in short
 * stretches: added to busy_ns, to estimated_ns and to the bins. */
void fw_estimate(fw_state *s, unsigned device, uint64_t a, uint64_t b, double share, double short_share);

/* 64-bit FNV-1a of a kernel's name (never 0). */
uint64_t fw_kernel_id(const char *name);

/* Count one launch of kernel `id` that ran `ns`. */
void fw_kernel_add(fw_state *s, unsigned device, uint64_t id, uint64_t ns);

/* Name a device (its GPU UUID, "GPU-..."). */
void fw_set_uuid(fw_state *s, unsigned device, const char *uuid);

/* The state file's JSON into buf (NUL-terminated); the length written, or -1 if buf is too small.
 * pidns: the inode of the process's PID namespace; start_ticks: field 22 of /proc/self/stat (so
 * the agent can tell a reused PID); now_ns: CLOCK_REALTIME; final: the process is exiting. */
int fw_format(const fw_state *s, char *buf, size_t len, long pid, uint64_t pidns, uint64_t start_ticks,
              uint64_t now_ns, int final, uint64_t dropped_records);

/* The same, saying whether the process's kernels are traced in windows now (fw_format: no). */
int fw_format_windowed(const fw_state *s, char *buf, size_t len, long pid, uint64_t pidns, uint64_t start_ticks,
                       uint64_t now_ns, int final, uint64_t dropped_records, int windowed);

#endif
