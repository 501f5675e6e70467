/* fleetwatt-gputime: an opt-in CUDA injection library that measures a process's own GPU time.
 *
 * Loaded into any CUDA process by the driver when CUDA_INJECTION64_PATH names it (no root, no change
 * to the program). CUPTI's activity API reports every kernel, copy and fill the process ran on each
 * GPU with its start and end on the GPU's clock; the union of those intervals is the time the GPU was
 * busy with this process's work, and per kernel (a hash of its name) the time its launches ran. Every
 * FLEETWATT_GPUTIME_FLUSH_MS (200) the library flushes CUPTI's
 * buffers and rewrites a small JSON file (gputime_core.c: fw_format) in FLEETWATT_GPUTIME_DIR
 * (/run/fleetwatt/gputime), named <pid namespace inode>-<pid>.json, which fleetwatt-agent reads.
 * FLEETWATT_GPUTIME_DUMP=<path>: also append every interval (two little-endian uint64 of
 * CLOCK_REALTIME ns each) to <path>.<pid> - for the accuracy campaign, not for production.
 * CUPTI's buffers: FLEETWATT_GPUTIME_PER_THREAD_BUFFERS=1 (a host buffer per launching thread) and
 * FLEETWATT_GPUTIME_DEVICE_BUFFER_MB (the device buffer CUPTI's timestamps go to; CUPTI's default ~3 MB).
 * FLEETWATT_GPUTIME_RECORDS=discard: CUPTI traces, the records are thrown away unread - the overhead runs'
 * measure of CUPTI's own cost, never for production (the state file then says nothing).
 *
 * A launch-bound process (more than FLEETWATT_GPUTIME_WINDOW_ABOVE kernels a second, 20,000, while its
 * work keeps the GPU busy less than half the time) pays for CUPTI's record of every kernel in its own
 * pace: about a microsecond a kernel on Hopper. Its work is then traced in windows instead,
 * FLEETWATT_GPUTIME_WINDOW_MS (50) of every FLEETWATT_GPUTIME_WINDOW_EVERY_MS (2000): between two windows
 * its time is counted at the busy share of the window before (fw_estimate), and its state file says so
 * ("windowed", each GPU's "estimated_ns"). It goes back to tracing everything when a window sees it no
 * longer launch-bound. FLEETWATT_GPUTIME_WINDOW_ABOVE=0: every kernel traced, always.
 *
 * Anything that fails (no CUPTI, no folder) is said once on stderr and the process runs on untouched.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gputime_core.h"

/* The activity record structs of the CUPTI this is built against (build.sh picks the newest). */
#ifndef FW_KERNEL_T
#define FW_KERNEL_T CUpti_ActivityKernel9
#endif
#ifndef FW_MEMCPY_T
#define FW_MEMCPY_T CUpti_ActivityMemcpy6
#endif
#ifndef FW_MEMSET_T
#define FW_MEMSET_T CUpti_ActivityMemset4
#endif

#define BUFFER_SIZE (8u << 20)
#define MAX_BATCH 65536
#define POOL_MAX 8 /* activity buffers kept for reuse (64 MB at most) */

static fw_state g_state;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_enabled;
static pid_t g_pid;
static uint64_t g_pidns, g_start_ticks;
static char g_path[4096], g_tmp[4200];
static unsigned g_flush_ms = 200;
static volatile int g_stop;
static pthread_t g_thread;
static int64_t g_offset_ns; /* CLOCK_REALTIME - CUPTI timestamp */
static uint64_t g_dropped;
static FILE *g_dump;
static fw_interval g_batch[FW_MAX_DEVICES][256];
static size_t g_batch_n[FW_MAX_DEVICES];
static int g_named[FW_MAX_DEVICES];
static int g_discard; /* FLEETWATT_GPUTIME_RECORDS=discard */

/* Tracing in windows (see the top). Driven by the flusher thread alone (g_tracing is its own); the rest
 * under g_lock, which the state's writer and the exit handler take too. */
static uint64_t g_window_above = 20000; /* kernels a second */
static uint64_t g_window_ns = 50000000ull, g_window_every_ns = 2000000000ull;
static volatile uint64_t g_kernel_records; /* kernel records read so far (buffer_completed) */
static int g_windowed;                     /* tracing in windows now */
static int g_tracing = 1;                  /* the activity kinds enabled now */
static uint64_t g_check_from_ns, g_check_records, g_check_busy[FW_MAX_DEVICES];
static uint64_t g_window_on_ns, g_window_off_ns, g_estimated_until_ns;
static double g_share[FW_MAX_DEVICES], g_short_share[FW_MAX_DEVICES];

static void say(const char *what) { fprintf(stderr, "fleetwatt-gputime: %s\n", what); }

static uint64_t realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sync_clocks(void) {
    uint64_t c = 0;
    uint64_t r0 = realtime_ns();
    if (cuptiGetTimestamp(&c) != CUPTI_SUCCESS) return;
    uint64_t r1 = realtime_ns();
    g_offset_ns = (int64_t)((r0 + r1) / 2) - (int64_t)c;
}

static uint64_t read_start_ticks(void) {
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p) return 0;
    /* after ") " come fields 3, 4, ...: starttime is field 22 */
    int field = 2;
    for (p++; *p; p++) {
        if (*p == ' ' && ++field == 22) return strtoull(p + 1, NULL, 10);
    }
    return 0;
}

/* The driver's own functions, found in the libcuda the process has loaded: the library links nothing of
 * CUDA but CUPTI, so it loads (and fails softly) wherever CUPTI does. */
typedef CUresult (*device_get_fn)(CUdevice *, int);
typedef CUresult (*device_uuid_fn)(CUuuid *, CUdevice);
static device_get_fn g_device_get;
static device_uuid_fn g_device_uuid;

static void find_driver(void) {
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!cuda) cuda = dlopen("libcuda.so.1", RTLD_LAZY);
    if (!cuda) return;
    g_device_get = (device_get_fn)dlsym(cuda, "cuDeviceGet");
    g_device_uuid = (device_uuid_fn)dlsym(cuda, "cuDeviceGetUuid_v2");
    if (!g_device_uuid) g_device_uuid = (device_uuid_fn)dlsym(cuda, "cuDeviceGetUuid");
}

static void name_device(unsigned dev) {
    if (dev >= FW_MAX_DEVICES || g_named[dev]) return;
    g_named[dev] = 1;
    CUdevice d;
    CUuuid u;
    if (!g_device_get || !g_device_uuid) return; /* left unnamed: the agent then trusts none of its GPUs */
    if (g_device_get(&d, (int)dev) != CUDA_SUCCESS || g_device_uuid(&u, d) != CUDA_SUCCESS) return;
    const unsigned char *b = (const unsigned char *)u.bytes;
    char s[FW_UUID_LEN];
    snprintf(s, sizeof(s), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    fw_set_uuid(&g_state, dev, s);
}

static void flush_batch(unsigned dev) {
    if (!g_batch_n[dev]) return;
    if (g_dump) {
        for (size_t i = 0; i < g_batch_n[dev]; i++) {
            uint64_t pair[3] = {dev, g_batch[dev][i].start, g_batch[dev][i].end};
            fwrite(pair, sizeof(pair), 1, g_dump);
        }
    }
    fw_add(&g_state, dev, g_batch[dev], g_batch_n[dev]);
    g_batch_n[dev] = 0;
}

/* A kernel's id from its name, remembered by the name's address (CUPTI hands the same string for every
 * launch of a function): hashing a long templated name per launch would cost the tiny-kernel launcher. */
static uint64_t kernel_id(const char *name) {
    static struct {
        const char *name;
        uint64_t id;
    } seen[256];
    if (!name) return fw_kernel_id("?");
    unsigned slot = (unsigned)(((uintptr_t)name >> 4) % 256);
    if (seen[slot].name != name) {
        seen[slot].name = name;
        seen[slot].id = fw_kernel_id(name);
    }
    return seen[slot].id;
}

static void add(unsigned dev, uint64_t start, uint64_t end, uint64_t id) {
    if (dev >= FW_MAX_DEVICES || end <= start) return;
    name_device(dev);
    fw_kernel_add(&g_state, dev, id, end - start);
    g_batch[dev][g_batch_n[dev]].start = (uint64_t)((int64_t)start + g_offset_ns);
    g_batch[dev][g_batch_n[dev]].end = (uint64_t)((int64_t)end + g_offset_ns);
    if (++g_batch_n[dev] == sizeof(g_batch[0]) / sizeof(g_batch[0][0])) flush_batch(dev);
}

/* Activity buffers are kept for reuse. CUPTI asks for one in the thread that launches, when the one it
 * fills is full: for a launch-bound job (146,000 kernel records of 216 bytes a second) four times a
 * second. A fresh buffer costs that thread an mmap and its page faults, and CUPTI then zeroes its 8 MB
 * there too; one from the pool is resident and was zeroed by the thread that read its records (CUPTI is
 * told so: CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER). */
static uint8_t *g_pool[POOL_MAX];
static int g_pool_n;
static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    uint8_t *b = NULL;
    pthread_mutex_lock(&g_pool_lock);
    if (g_pool_n) b = g_pool[--g_pool_n];
    pthread_mutex_unlock(&g_pool_lock);
    if (!b) b = calloc(1, BUFFER_SIZE); /* zeroed, aligned for any record (16 bytes) */
    *buffer = b;
    *size = b ? BUFFER_SIZE : 0;
    *max_records = 0;
}

static void recycle(uint8_t *buffer) {
    memset(buffer, 0, BUFFER_SIZE);
    pthread_mutex_lock(&g_pool_lock);
    if (g_pool_n < POOL_MAX) {
        g_pool[g_pool_n++] = buffer;
        buffer = NULL;
    }
    pthread_mutex_unlock(&g_pool_lock);
    free(buffer);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    CUpti_Activity *rec = NULL;
    if (g_discard) {
        recycle(buffer);
        return;
    }
    pthread_mutex_lock(&g_lock);
    while (valid && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
            const FW_KERNEL_T *k = (const FW_KERNEL_T *)rec;
            g_kernel_records++;
            add(k->deviceId, k->start, k->end, kernel_id(k->name));
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const FW_MEMCPY_T *m = (const FW_MEMCPY_T *)rec;
            add(m->deviceId, m->start, m->end, fw_kernel_id("memcpy") + m->copyKind);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const FW_MEMSET_T *m = (const FW_MEMSET_T *)rec;
            add(m->deviceId, m->start, m->end, fw_kernel_id("memset"));
            break;
        }
        default:
            break;
        }
    }
    for (unsigned d = 0; d < FW_MAX_DEVICES; d++) flush_batch(d);
    size_t dropped = 0;
    if (ctx == NULL && cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
        g_dropped += dropped;
    pthread_mutex_unlock(&g_lock);
    (void)size; /* BUFFER_SIZE: every buffer is ours */
    recycle(buffer);
}

static void write_state(int final) {
    static char buf[FW_MAX_DEVICES * (400 + FW_KERNELS_SHOWN * 64 + FW_BINS_SHOWN * 22) + 512]; /* under the lock */
    if (g_discard) return; /* no file: the agent splits the process as one without the library, never as idle */
    /* Under the lock: the flusher and the exit handler may both write. A new file renamed over the
     * old: the agent reads a whole state or the one before, never half. */
    pthread_mutex_lock(&g_lock);
    int n = fw_format_windowed(&g_state, buf, sizeof(buf), (long)g_pid, g_pidns, g_start_ticks, realtime_ns(), final,
                               g_dropped, g_windowed);
    int fd = n < 0 ? -1 : open(g_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, buf, (size_t)n);
        close(fd);
        if (w == n) rename(g_tmp, g_path);
        else unlink(g_tmp);
    }
    pthread_mutex_unlock(&g_lock);
}

/* The three kinds on or off together: a process's copies are traced when its kernels are. */
static void trace(int on) {
    if (on == g_tracing) return;
    CUpti_ActivityKind kinds[3] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                   CUPTI_ACTIVITY_KIND_MEMSET};
    for (int i = 0; i < 3; i++) on ? cuptiActivityEnable(kinds[i]) : cuptiActivityDisable(kinds[i]);
    g_tracing = on;
}

/* Whether the work read since the last check is launch-bound: many kernels a second, the GPU busy with
 * them less than half the time on every device. Starts the next check. Under g_lock. */
static int launch_bound(uint64_t now) {
    uint64_t span = now - g_check_from_ns, kernels = g_kernel_records - g_check_records;
    int many = span > 0 && (double)kernels * 1e9 / (double)span > (double)g_window_above, busy = 0;
    for (unsigned d = 0; d < FW_MAX_DEVICES; d++) {
        if (!g_state.devices[d].used) continue;
        uint64_t b = fw_busy_ns(&g_state, d);
        if (span > 0 && (double)(b - g_check_busy[d]) > 0.5 * (double)span) busy = 1;
        g_check_busy[d] = b;
    }
    g_check_from_ns = now;
    g_check_records = g_kernel_records;
    return many && !busy;
}

/* Each device's busy share of the window just traced [g_window_on_ns, g_window_off_ns). Under g_lock. */
static void window_shares(void) {
    double span = (double)(g_window_off_ns - g_window_on_ns);
    for (unsigned d = 0; d < FW_MAX_DEVICES; d++) {
        uint64_t busy = 0, short_ns = 0;
        if (g_state.devices[d].used) fw_busy_between(&g_state, d, g_window_on_ns, g_window_off_ns, &busy, &short_ns);
        g_share[d] = span > 0 ? (double)busy / span : 0.0;
        g_short_share[d] = span > 0 ? (double)short_ns / span : 0.0;
    }
}

/* Count the time not traced up to `now` at the last window's shares. Under g_lock. */
static void estimate_until(uint64_t now) {
    if (now <= g_estimated_until_ns) return;
    for (unsigned d = 0; d < FW_MAX_DEVICES; d++)
        if (g_state.devices[d].used && g_share[d] > 0)
            fw_estimate(&g_state, d, g_estimated_until_ns, now, g_share[d], g_short_share[d]);
    g_estimated_until_ns = now;
}

/* Tracing just stopped: every record of what it traced, delivered now. A flush without the force returns
 * a buffer only once every record in it is complete, which for a process that keeps launching may be
 * never within a window (its records then arrived a buffer at a time, seconds late, and a window read
 * before they came looked idle). With nothing more being traced, the work in flight ends within the
 * millisecond waited, and the forced flush hands back every record, complete. */
static void flush_traced(void) {
    struct timespec ms = {0, 1000000L};
    nanosleep(&ms, NULL);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

/* One step of the windows, every tick of the flusher (10 ms). CUPTI is flushed, enabled and disabled
 * outside g_lock: a flush hands buffers to buffer_completed in this thread, which takes it. */
static void window_step(void) {
    uint64_t now = realtime_ns();
    if (!g_windowed) {
        /* Deciding, while every kernel is traced: on the records delivered so far (a flush without the
         * force, which never cuts a buffer short; they may come a buffer at a time: a decision late). */
        if (now - g_check_from_ns < 100000000ull) return;
        cuptiActivityFlushAll(0);
        pthread_mutex_lock(&g_lock);
        int bound = launch_bound(now);
        pthread_mutex_unlock(&g_lock);
        if (!bound) return;
        trace(0); /* the last 100 ms, read whole, are the first window */
        uint64_t off = realtime_ns();
        flush_traced();
        pthread_mutex_lock(&g_lock);
        g_window_on_ns = off - 100000000ull;
        g_window_off_ns = g_estimated_until_ns = off;
        window_shares();
        g_windowed = 1;
        pthread_mutex_unlock(&g_lock);
        return;
    }
    if (!g_tracing) { /* between windows: count the time, open the next window when due */
        int open = 0;
        pthread_mutex_lock(&g_lock);
        estimate_until(now);
        if (now - g_window_off_ns >= g_window_every_ns - g_window_ns) {
            open = 1;
            g_window_on_ns = now;
            g_check_from_ns = now;
            g_check_records = g_kernel_records;
            for (unsigned d = 0; d < FW_MAX_DEVICES; d++) g_check_busy[d] = fw_busy_ns(&g_state, d);
        }
        pthread_mutex_unlock(&g_lock);
        if (open) trace(1);
        return;
    }
    if (now - g_window_on_ns < g_window_ns) return;
    trace(0); /* the window closes: its records, every one, before its pace and shares are read */
    uint64_t off = realtime_ns();
    flush_traced();
    pthread_mutex_lock(&g_lock);
    int bound = launch_bound(off);
    g_window_off_ns = g_estimated_until_ns = off;
    window_shares();
    if (!bound) g_windowed = 0; /* no longer launch-bound: every kernel traced again */
    pthread_mutex_unlock(&g_lock);
    if (!bound) trace(1);
}

static void *flusher(void *arg) {
    (void)arg;
    const unsigned tick_ms = 10;
    struct timespec ts = {0, (long)tick_ms * 1000000L};
    unsigned since_flush = 0;
    while (!g_stop) {
        nanosleep(&ts, NULL);
        if (g_stop) break;
        if (g_window_above) window_step();
        since_flush += tick_ms;
        if (since_flush < g_flush_ms) continue;
        since_flush = 0;
        cuptiActivityFlushAll(0);
        write_state(0);
    }
    return NULL;
}

static void at_exit(void) {
    if (!g_enabled || getpid() != g_pid) return;
    g_stop = 1;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (g_windowed && !g_tracing) { /* the time since the last window, as the windows count it */
        pthread_mutex_lock(&g_lock);
        estimate_until(realtime_ns());
        pthread_mutex_unlock(&g_lock);
    }
    write_state(1);
    if (g_dump) fflush(g_dump);
}

static int enable(CUpti_ActivityKind kind, const char *name) {
    CUptiResult r = cuptiActivityEnable(kind);
    if (r == CUPTI_SUCCESS) return 0;
    const char *msg = NULL;
    cuptiGetResultString(r, &msg);
    fprintf(stderr, "fleetwatt-gputime: GPU time not measured: CUPTI cannot trace %s (%s)\n", name,
            msg ? msg : "unknown error");
    return -1;
}

/* Called once by the CUDA driver when CUDA_INJECTION64_PATH names this library. */
__attribute__((visibility("default"))) int InitializeInjection(void) {
    const char *dir = getenv("FLEETWATT_GPUTIME_DIR");
    if (!dir || !*dir) dir = "/run/fleetwatt/gputime";
    const char *flush = getenv("FLEETWATT_GPUTIME_FLUSH_MS");
    if (flush && atoi(flush) >= 10 && atoi(flush) <= 60000) g_flush_ms = (unsigned)atoi(flush);
    g_pid = getpid();
    struct stat st;
    g_pidns = stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
    g_start_ticks = read_start_ticks();
    if (mkdir(dir, 01777) == 0) {
        chmod(dir, 01777); /* every user's jobs write here; the sticky bit keeps each one's files its own */
    } else if (errno != EEXIST) {
        fprintf(stderr, "fleetwatt-gputime: GPU time not measured: cannot create %s: %s\n", dir, strerror(errno));
        return 1; /* the process runs on; the agent splits it as before */
    }
    snprintf(g_path, sizeof(g_path), "%s/%llu-%ld.json", dir, (unsigned long long)g_pidns, (long)g_pid);
    snprintf(g_tmp, sizeof(g_tmp), "%s/.%llu-%ld.tmp", dir, (unsigned long long)g_pidns, (long)g_pid);
    fw_state_init(&g_state, 1000000000ull); /* late records up to 1 s are merged exactly */
    fw_set_bins(&g_state, 10000000ull);      /* and busy time kept per 10 ms bin, for the agent */
    const char *dump = getenv("FLEETWATT_GPUTIME_DUMP");
    if (dump && *dump) {
        char p[4200];
        snprintf(p, sizeof(p), "%s.%ld", dump, (long)g_pid);
        g_dump = fopen(p, "wb");
    }
    uint8_t zeroed = 1; /* buffers come zeroed (buffer_requested): CUPTI need not zero them in the launching thread */
    size_t zeroed_size = sizeof(zeroed);
    cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &zeroed_size, &zeroed);
    const char *above = getenv("FLEETWATT_GPUTIME_WINDOW_ABOVE");
    if (above && *above) g_window_above = strtoull(above, NULL, 10);
    const char *window_ms = getenv("FLEETWATT_GPUTIME_WINDOW_MS");
    if (window_ms && atoi(window_ms) >= 10 && atoi(window_ms) <= 10000) g_window_ns = (uint64_t)atoi(window_ms) * 1000000ull;
    const char *every_ms = getenv("FLEETWATT_GPUTIME_WINDOW_EVERY_MS");
    if (every_ms && atoi(every_ms) >= 20 && atoi(every_ms) <= 60000) g_window_every_ns = (uint64_t)atoi(every_ms) * 1000000ull;
    if (g_window_every_ns <= g_window_ns) g_window_above = 0; /* windows as long as their period: trace all */
    const char *records = getenv("FLEETWATT_GPUTIME_RECORDS");
    g_discard = records && strcmp(records, "discard") == 0;
    const char *per_thread = getenv("FLEETWATT_GPUTIME_PER_THREAD_BUFFERS");
    if (per_thread && strcmp(per_thread, "1") == 0) { /* before the callbacks are registered, as CUPTI asks */
#ifdef FW_HAVE_PER_THREAD_BUFFERS
        uint8_t on = 1;
        size_t on_size = sizeof(on);
        if (cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &on_size, &on) != CUPTI_SUCCESS)
#endif
            say("CUPTI keeps one activity buffer for every thread (per-thread buffers refused)");
    }
    const char *device_mb = getenv("FLEETWATT_GPUTIME_DEVICE_BUFFER_MB");
    if (device_mb && atoi(device_mb) >= 1 && atoi(device_mb) <= 1024) {
        size_t bytes = (size_t)atoi(device_mb) << 20, bytes_size = sizeof(bytes);
        if (cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &bytes_size, &bytes) != CUPTI_SUCCESS)
            say("CUPTI kept its own device buffer size");
    }
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
        say("GPU time not measured: CUPTI refused its callbacks");
        return 1;
    }
    /* All three or none: a process whose copies went uncounted would look less busy than it was. */
    if (enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernels") || enable(CUPTI_ACTIVITY_KIND_MEMCPY, "copies") ||
        enable(CUPTI_ACTIVITY_KIND_MEMSET, "fills")) {
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
        return 1;
    }
    sync_clocks();
    find_driver();
    g_check_from_ns = realtime_ns();
    g_enabled = 1;
    write_state(0);
    atexit(at_exit);
    if (pthread_create(&g_thread, NULL, flusher, NULL) == 0) pthread_detach(g_thread);
    return 1;
}
