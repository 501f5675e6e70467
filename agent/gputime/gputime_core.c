/* See gputime_core.h. Pure C99: no I/O, no globals. */
#include "gputime_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fw_state_init(fw_state *s, uint64_t horizon_ns) {
    memset(s, 0, sizeof(*s));
    s->horizon_ns = horizon_ns;
}

size_t fw_state_size(void) { return sizeof(fw_state); }

void fw_state_free(fw_state *s) {
    for (unsigned i = 0; i < FW_MAX_DEVICES; i++) free(s->devices[i].open);
    free(s->scratch);
    memset(s, 0, sizeof(*s));
}

void fw_set_bins(fw_state *s, uint64_t bin_ns) { s->bin_ns = bin_ns; }

/* Add [a, b) of committed busy time to its bins, at `share` of it (1 where traced); `short_share` of it
 * in stretches shorter than FW_SHORT_NS. */
static void bins_add_share(const fw_state *s, fw_device *d, uint64_t a, uint64_t b, double share, double short_share) {
    if (!s->bin_ns) return;
    while (a < b) {
        uint64_t bin = a / s->bin_ns, edge = (bin + 1) * s->bin_ns;
        uint64_t upto = b < edge ? b : edge;
        unsigned slot = (unsigned)(bin % FW_RING);
        if (d->ring_bin[slot] != bin) { /* a slot of an older bin: it is this one's now */
            d->ring_bin[slot] = bin;
            d->ring_us[slot] = 0;
            d->ring_short_us[slot] = 0;
        }
        double us = (double)(upto - a) / 1000.0;
        d->ring_us[slot] += (uint32_t)(us * share);
        d->ring_short_us[slot] += (uint32_t)(us * short_share);
        a = upto;
    }
}

static void bins_add(const fw_state *s, fw_device *d, uint64_t a, uint64_t b) {
    bins_add_share(s, d, a, b, 1.0, b - a < FW_SHORT_NS ? 1.0 : 0.0);
}

static int by_start(const void *a, const void *b) {
    const fw_interval *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static int reserve(fw_interval **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    fw_interval *q = realloc(*p, c * sizeof(*q));
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* Append [a, b) to a sorted disjoint list, merging with its last interval where they touch. */
static void push(fw_interval *out, size_t *n, uint64_t a, uint64_t b) {
    if (*n && a <= out[*n - 1].end) {
        if (b > out[*n - 1].end) out[*n - 1].end = b;
        return;
    }
    out[*n].start = a;
    out[*n].end = b;
    (*n)++;
}

/* Room for `need` open intervals from the front of the list (moving them there if the dropped ones
 * in front would leave too little). */
static int reserve_open(fw_device *d, size_t need) {
    if (d->open_off && d->open_off + need > d->cap_open) {
        memmove(d->open, d->open + d->open_off, d->n_open * sizeof(*d->open));
        d->open_off = 0;
    }
    return reserve(&d->open, &d->cap_open, d->open_off + need);
}

int fw_add(fw_state *s, unsigned device, const fw_interval *batch, size_t n) {
    if (device >= FW_MAX_DEVICES || n == 0) return 0;
    fw_device *d = &s->devices[device];
    d->used = 1;
    d->records += n;
    if (reserve(&s->scratch, &s->cap_scratch, n) != 0 || reserve_open(d, d->n_open + n) != 0) {
        /* No memory: count each record only past what is already known busy. */
        for (size_t i = 0; i < n; i++) {
            uint64_t a = batch[i].start, b = batch[i].end;
            uint64_t from = d->committed_until;
            const fw_interval *last = d->n_open ? &d->open[d->open_off + d->n_open - 1] : NULL;
            if (last && last->end > from) from = last->end;
            if (b > from && b > a) {
                d->committed_ns += b - (a > from ? a : from);
                bins_add(s, d, a > from ? a : from, b);
                d->committed_until = b;
            }
        }
        return -1;
    }
    /* The batch, sorted, clipped to what is not committed yet. */
    fw_interval *in = s->scratch;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = batch[i].start, b = batch[i].end;
        if (b <= a) continue;
        if (a < d->committed_until) {
            uint64_t cut = (b < d->committed_until ? b : d->committed_until) - a;
            d->late_clipped_ns += cut;
            a = d->committed_until;
            if (b <= a) continue;
        }
        in[m].start = a;
        in[m].end = b;
        m++;
    }
    if (m == 0) return 0;
    qsort(in, m, sizeof(*in), by_start);
    /* The open intervals that end before the batch's first start cannot touch it (the list is sorted
     * and disjoint, so their ends rise): keep them where they are, merge the batch with the rest. */
    fw_interval *open = d->open + d->open_off;
    size_t lo = 0, hi = d->n_open;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (open[mid].end < in[0].start) lo = mid + 1;
        else hi = mid;
    }
    size_t keep = lo, tail = d->n_open - keep;
    if (reserve(&s->scratch, &s->cap_scratch, 2 * m + tail) != 0) return -1;
    in = s->scratch;
    fw_interval *out = s->scratch + m;
    size_t i = 0, j = keep, k = 0;
    while (i < m || j < d->n_open) {
        const fw_interval *next;
        if (j >= d->n_open || (i < m && in[i].start < open[j].start))
            next = &in[i++];
        else
            next = &open[j++];
        push(out, &k, next->start, next->end);
    }
    memcpy(open + keep, out, k * sizeof(*out)); /* room: reserve_open above, and k <= m + tail */
    d->n_open = keep + k;
    /* Commit what ended more than the horizon before the newest end (the last interval's). */
    uint64_t newest = open[d->n_open - 1].end;
    while (d->n_open && open[0].end + s->horizon_ns < newest) {
        d->committed_ns += open[0].end - open[0].start;
        bins_add(s, d, open[0].start, open[0].end);
        d->committed_until = open[0].end;
        open++;
        d->open_off++;
        d->n_open--;
    }
    return 0;
}

uint64_t fw_busy_ns(const fw_state *s, unsigned device) {
    if (device >= FW_MAX_DEVICES) return 0;
    const fw_device *d = &s->devices[device];
    uint64_t t = d->committed_ns + d->estimated_ns;
    const fw_interval *open = d->open + d->open_off;
    for (size_t i = 0; i < d->n_open; i++) t += open[i].end - open[i].start;
    return t;
}

void fw_busy_between(const fw_state *s, unsigned device, uint64_t a, uint64_t b, uint64_t *busy, uint64_t *short_ns) {
    *busy = 0;
    *short_ns = 0;
    if (device >= FW_MAX_DEVICES || b <= a) return;
    const fw_device *d = &s->devices[device];
    const fw_interval *open = d->open + d->open_off;
    for (size_t i = 0; i < d->n_open; i++) {
        uint64_t x = open[i].start > a ? open[i].start : a, y = open[i].end < b ? open[i].end : b;
        if (y <= x) continue;
        *busy += y - x;
        if (open[i].end - open[i].start < FW_SHORT_NS) *short_ns += y - x;
    }
    /* committed time: only in bins, counted where its bin overlaps [a, min(b, committed_until)) */
    uint64_t upto = b < d->committed_until ? b : d->committed_until;
    if (!s->bin_ns || upto <= a) return;
    for (uint64_t bin = a / s->bin_ns; bin * s->bin_ns < upto; bin++) {
        unsigned slot = (unsigned)(bin % FW_RING);
        if (d->ring_bin[slot] != bin) continue;
        uint64_t lo = bin * s->bin_ns, hi = lo + s->bin_ns;
        uint64_t x = lo > a ? lo : a, y = hi < upto ? hi : upto;
        double part = (double)(y - x) / (double)s->bin_ns;
        *busy += (uint64_t)(d->ring_us[slot] * 1000.0 * part);
        *short_ns += (uint64_t)(d->ring_short_us[slot] * 1000.0 * part);
    }
}

void fw_estimate(fw_state *s, unsigned device, uint64_t a, uint64_t b, double share, double short_share) {
    if (device >= FW_MAX_DEVICES || b <= a) return;
    if (share < 0.0) share = 0.0;
    if (share > 1.0) share = 1.0;
    if (short_share < 0.0) short_share = 0.0;
    if (short_share > share) short_share = share;
    fw_device *d = &s->devices[device];
    d->used = 1;
    d->estimated_ns += (uint64_t)((double)(b - a) * share);
    bins_add_share(s, d, a, b, share, short_share);
}

uint64_t fw_kernel_id(const char *name) {
    uint64_t h = 14695981039346656037ull; /* FNV-1a 64: offset basis, prime below */
    for (const unsigned char *p = (const unsigned char *)(name ? name : ""); *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

void fw_kernel_add(fw_state *s, unsigned device, uint64_t id, uint64_t ns) {
    if (device >= FW_MAX_DEVICES || id == 0) return;
    fw_device *d = &s->devices[device];
    d->used = 1;
    for (unsigned i = 0; i < FW_KERNEL_SLOTS; i++) { /* open addressing, linear probing */
        fw_kernel *k = &d->kernels[(id + i) % FW_KERNEL_SLOTS];
        if (k->id == id || k->id == 0) {
            k->id = id;
            k->busy_ns += ns;
            k->count++;
            return;
        }
    }
    d->other_kernels_ns += ns;
}

void fw_set_uuid(fw_state *s, unsigned device, const char *uuid) {
    if (device >= FW_MAX_DEVICES || !uuid) return;
    fw_device *d = &s->devices[device];
    size_t k = 0;
    /* Keep only what a UUID holds: no quote or control character can reach the JSON. */
    for (const char *p = uuid; *p && k + 1 < FW_UUID_LEN; p++) {
        char c = *p;
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-') d->uuid[k++] = c;
    }
    d->uuid[k] = '\0';
}

int fw_format(const fw_state *s, char *buf, size_t len, long pid, uint64_t pidns, uint64_t start_ticks,
              uint64_t now_ns, int final, uint64_t dropped_records) {
    return fw_format_windowed(s, buf, len, pid, pidns, start_ticks, now_ns, final, dropped_records, 0);
}

/* Append `",name":[v...]` of one device's bins from `first` to `last` (committed + open, or their short
 * part). -1 where buf is too small. */
static int format_bins(const fw_state *s, const fw_device *d, char *buf, size_t len, size_t *off, const char *name,
                       uint64_t first, uint64_t last, int short_only) {
    int w = snprintf(buf + *off, len - *off, ",\"%s\":[", name);
    if (w < 0 || (size_t)w >= len - *off) return -1;
    *off += (size_t)w;
    const fw_interval *open = d->open + d->open_off;
    size_t next_open = 0;
    for (uint64_t bin = first; bin <= last; bin++) {
        unsigned slot = (unsigned)(bin % FW_RING);
        uint64_t us = d->ring_bin[slot] == bin ? (short_only ? d->ring_short_us[slot] : d->ring_us[slot]) : 0;
        uint64_t lo = bin * s->bin_ns, hi = lo + s->bin_ns;
        while (next_open < d->n_open && open[next_open].end <= lo) next_open++;
        for (size_t j = next_open; j < d->n_open && open[j].start < hi; j++) {
            if (short_only && open[j].end - open[j].start >= FW_SHORT_NS) continue;
            uint64_t a = open[j].start > lo ? open[j].start : lo;
            uint64_t b = open[j].end < hi ? open[j].end : hi;
            if (b > a) us += (b - a) / 1000;
        }
        w = snprintf(buf + *off, len - *off, "%s%llu", bin == first ? "" : ",", (unsigned long long)us);
        if (w < 0 || (size_t)w >= len - *off) return -1;
        *off += (size_t)w;
    }
    w = snprintf(buf + *off, len - *off, "]");
    if (w < 0 || (size_t)w >= len - *off) return -1;
    *off += (size_t)w;
    return 0;
}

int fw_format_windowed(const fw_state *s, char *buf, size_t len, long pid, uint64_t pidns, uint64_t start_ticks,
                       uint64_t now_ns, int final, uint64_t dropped_records, int windowed) {
    size_t off = 0;
    int w = snprintf(buf, len,
                     "{\"format\":\"fleetwatt-gputime\",\"version\":1,\"pid\":%ld,\"pidns\":%llu,"
                     "\"start_ticks\":%llu,\"written_ns\":%llu,\"final\":%s,\"dropped_records\":%llu,"
                     "\"windowed\":%s,\"gpus\":[",
                     pid, (unsigned long long)pidns, (unsigned long long)start_ticks, (unsigned long long)now_ns,
                     final ? "true" : "false", (unsigned long long)dropped_records, windowed ? "true" : "false");
    if (w < 0 || (size_t)w >= len) return -1;
    off = (size_t)w;
    int first = 1;
    for (unsigned i = 0; i < FW_MAX_DEVICES; i++) {
        const fw_device *d = &s->devices[i];
        if (!d->used) continue;
        w = snprintf(buf + off, len - off,
                     "%s{\"device\":%u,\"uuid\":\"%s\",\"busy_ns\":%llu,\"estimated_ns\":%llu,\"records\":%llu,"
                     "\"other_kernels_ns\":%llu,\"kernels\":[",
                     first ? "" : ",", i, d->uuid, (unsigned long long)fw_busy_ns(s, i),
                     (unsigned long long)d->estimated_ns, (unsigned long long)d->records,
                     (unsigned long long)d->other_kernels_ns);
        if (w < 0 || (size_t)w >= len - off) return -1;
        off += (size_t)w;
        first = 0;
        /* the busiest FW_KERNELS_SHOWN, busiest first; the rest add to nothing here (their time is in
         * busy_ns; kernels past the table's room in other_kernels_ns) */
        const fw_kernel *shown[FW_KERNELS_SHOWN];
        unsigned n_shown = 0;
        for (unsigned j = 0; j < FW_KERNEL_SLOTS; j++) {
            const fw_kernel *k = &d->kernels[j];
            if (!k->id) continue;
            unsigned at = n_shown < FW_KERNELS_SHOWN ? n_shown++ : FW_KERNELS_SHOWN;
            if (at == FW_KERNELS_SHOWN) {
                if (k->busy_ns <= shown[FW_KERNELS_SHOWN - 1]->busy_ns) continue;
                at = FW_KERNELS_SHOWN - 1;
            }
            while (at > 0 && shown[at - 1]->busy_ns < k->busy_ns) {
                shown[at] = shown[at - 1];
                at--;
            }
            shown[at] = k;
        }
        for (unsigned j = 0; j < n_shown; j++) {
            w = snprintf(buf + off, len - off, "%s[\"%016llx\",%llu,%llu]", j ? "," : "",
                         (unsigned long long)shown[j]->id, (unsigned long long)shown[j]->busy_ns,
                         (unsigned long long)shown[j]->count);
            if (w < 0 || (size_t)w >= len - off) return -1;
            off += (size_t)w;
        }
        w = snprintf(buf + off, len - off, "]");
        if (w < 0 || (size_t)w >= len - off) return -1;
        off += (size_t)w;
        if (s->bin_ns && now_ns >= FW_BINS_SHOWN * s->bin_ns) {
            /* the last FW_BINS_SHOWN bins up to the one holding now_ns: committed time + open intervals */
            uint64_t last = now_ns / s->bin_ns, first = last + 1 - FW_BINS_SHOWN;
            w = snprintf(buf + off, len - off, ",\"bin_ns\":%llu,\"bins_from\":%llu,\"short_ns\":%llu",
                         (unsigned long long)s->bin_ns, (unsigned long long)first, (unsigned long long)FW_SHORT_NS);
            if (w < 0 || (size_t)w >= len - off) return -1;
            off += (size_t)w;
            if (format_bins(s, d, buf, len, &off, "bins_us", first, last, 0) != 0) return -1;
            if (format_bins(s, d, buf, len, &off, "bins_short_us", first, last, 1) != 0) return -1;
        }
        w = snprintf(buf + off, len - off, "}");
        if (w < 0 || (size_t)w >= len - off) return -1;
        off += (size_t)w;
    }
    w = snprintf(buf + off, len - off, "]}\n");
    if (w < 0 || (size_t)w >= len - off) return -1;
    return (int)(off + (size_t)w);
}
