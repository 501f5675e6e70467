"""The workloads of the accuracy campaign (docs/accuracy.md): each a FIXED amount of work on GPU 0.

One process per run. It imports torch (no CUDA yet), prints `imported`, waits for a line on stdin
(the campaign's "go", so that the import does not count and the jobs of a mix start together), then
creates its CUDA context, allocates, runs `--iters` units of its work, synchronises and exits,
printing one JSON line of timestamps. `calibrate` measures the units per second of each kind alone.

Kinds (one unit of work each):
  mm      a bf16 8192 x 8192 matrix product (tensor cores, compute-bound)
  copy    a 1 GiB device-to-device copy (memory-bound streaming)
  xfmr    a transformer-like block forward in bf16 (QKV, attention, projection, layer norm, MLP)
  duty    one cycle: `--burst` mm units, synchronise, sleep 60 ms (busy about 40 % of the time alone)
  tiny    an add on a 4,096-element tensor (launch-bound: many tiny kernels)
  holder  holds 10 GiB; a 1024 x 1024 fp16 product, synchronise, sleep 0.2 s (the seed's light job)
--fake SECONDS_PER_UNIT: no GPU, no torch; sleep instead (the campaign's dry run). With
FLEETWATT_GPUTIME_DIR set (the campaign's --gputime-lib), the fake also plays the GPU-time library: its
state file (busy half of the time) and its interval dump, in the library's formats.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

KINDS = ("mm", "copy", "xfmr", "duty", "tiny", "holder")
DUTY_SLEEP_S = 0.060
HOLDER_SLEEP_S = 0.2
SYNC_EVERY = {"mm": 20, "copy": 20, "xfmr": 4, "tiny": 2000}


def build(kind: str, torch: Any, burst: int) -> Callable[[int], None]:
    """Allocate the kind's tensors; return run(n) doing n units and synchronising at the end."""
    dev = torch.device("cuda:0")
    sync = torch.cuda.synchronize
    if kind in ("mm", "duty"):
        a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
        b = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
        c = torch.empty(8192, 8192, dtype=torch.bfloat16, device=dev)

        def mm(n: int) -> None:
            for i in range(n):
                torch.matmul(a, b, out=c)
                if (i + 1) % SYNC_EVERY["mm"] == 0:
                    sync()
            sync()

        if kind == "mm":
            return mm

        def duty(n: int) -> None:
            for _ in range(n):
                mm(burst)
                time.sleep(DUTY_SLEEP_S)

        return duty
    if kind == "copy":
        src = torch.empty(2**29, dtype=torch.bfloat16, device=dev).normal_()
        dst = torch.empty_like(src)

        def copy(n: int) -> None:
            for i in range(n):
                dst.copy_(src)
                if (i + 1) % SYNC_EVERY["copy"] == 0:
                    sync()
            sync()

        return copy
    if kind == "xfmr":
        return _transformer(torch, dev, sync)
    if kind == "tiny":
        x = torch.zeros(4096, device=dev)

        def tiny(n: int) -> None:
            for i in range(n):
                x.add_(1.0)
                if (i + 1) % SYNC_EVERY["tiny"] == 0:
                    sync()
            sync()

        return tiny
    if kind == "holder":
        hold = torch.empty(10 * 2**30, dtype=torch.uint8, device=dev)
        m = torch.randn(1024, 1024, dtype=torch.float16, device=dev)

        def holder(n: int) -> None:
            for _ in range(n):
                torch.matmul(m, m)
                sync()
                time.sleep(HOLDER_SLEEP_S)
            assert hold.numel() == 10 * 2**30  # held to the end

        return holder
    raise SystemExit(f"unknown kind {kind!r}")


def _transformer(torch: Any, dev: Any, sync: Callable[[], None]) -> Callable[[int], None]:
    f = torch.nn.functional
    batch, seq, d, heads = 4, 2048, 4096, 32
    bf = torch.bfloat16
    x = torch.randn(batch, seq, d, dtype=bf, device=dev)
    w_qkv = torch.randn(d, 3 * d, dtype=bf, device=dev) * 0.02
    w_o = torch.randn(d, d, dtype=bf, device=dev) * 0.02
    w_1 = torch.randn(d, 4 * d, dtype=bf, device=dev) * 0.02
    w_2 = torch.randn(4 * d, d, dtype=bf, device=dev) * 0.02

    def step() -> None:
        h = f.layer_norm(x, (d,))
        q, k, v = (h @ w_qkv).view(batch, seq, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
        a = f.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = x + a.transpose(1, 2).reshape(batch, seq, d) @ w_o
        h = f.layer_norm(y, (d,))
        _ = y + f.gelu(h @ w_1) @ w_2

    def xfmr(n: int) -> None:
        with torch.no_grad():
            for i in range(n):
                step()
                if (i + 1) % SYNC_EVERY["xfmr"] == 0:
                    sync()
        sync()

    return xfmr


def calibrate(torch: Any, seconds: float) -> dict[str, float]:
    """Units per second of each kind alone (after a warm-up). duty and holder follow from mm and sleep."""
    rates: dict[str, float] = {}
    for kind in ("mm", "copy", "xfmr", "tiny"):
        run = build(kind, torch, burst=1)
        run(2 if kind != "tiny" else 200)
        n, t0 = 0, time.perf_counter()
        step = {"mm": 20, "copy": 20, "xfmr": 4, "tiny": 2000}[kind]
        while time.perf_counter() - t0 < seconds:
            run(step)
            n += step
        rates[kind] = n / (time.perf_counter() - t0)
        del run
        torch.cuda.empty_cache()
    return rates


class FakeGpuTime:
    """The injection library's files as agent/gputime/fleetwatt_gputime.c writes them, for the dry run:
    busy the first half of every 20 ms while working, on the fake GPU 0 (fake NVML's UUID)."""

    def __init__(self, folder: str, dump: str | None) -> None:
        pid = os.getpid()
        self.pidns = os.stat("/proc/self/ns/pid").st_ino
        with open("/proc/self/stat") as f:
            self.start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        self.path = os.path.join(folder, f"{self.pidns}-{pid}.json")
        self.dump = open(f"{dump}.{pid}", "wb") if dump else None  # noqa: SIM115 - closed in stop()
        self.busy_ns = 0
        self.working = False
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(0.02):
            if self.working:
                now = time.time_ns()
                self.busy_ns += 10_000_000
                if self.dump:
                    self.dump.write(struct.pack("<3Q", 0, now - 20_000_000, now - 10_000_000))
            self._write(final=False)

    def _write(self, final: bool) -> None:
        doc = {
            "format": "fleetwatt-gputime",
            "version": 1,
            "pid": os.getpid(),
            "pidns": self.pidns,
            "start_ticks": self.start_ticks,
            "written_ns": time.time_ns(),
            "final": final,
            "dropped_records": 0,
            "gpus": [{"device": 0, "uuid": "GPU-fake-0000", "busy_ns": self.busy_ns, "records": 1}],
        }
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write(json.dumps(doc, separators=(",", ":")))
        os.replace(tmp, self.path)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()
        self._write(final=True)
        if self.dump:
            self.dump.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=[*KINDS, "calibrate"])
    parser.add_argument("--iters", type=int, default=1)
    parser.add_argument("--burst", type=int, default=1, help="duty: mm units per cycle")
    parser.add_argument("--seconds", type=float, default=1.0, help="calibrate: seconds per kind")
    parser.add_argument("--fake", type=float, default=None, help="dry run: seconds per unit")
    args = parser.parse_args()
    torch: Any = None
    if args.fake is None:
        import torch as torch_module

        torch = torch_module
    print("imported", flush=True)
    if not sys.stdin.readline():  # the campaign closed our stdin: abandoned before "go"
        return 3
    t_go = time.time()
    if args.kind == "calibrate":
        rates = (
            calibrate(torch, args.seconds)
            if torch is not None
            else {k: 1.0 / args.fake for k in ("mm", "copy", "xfmr", "tiny")}
        )
        print(json.dumps({"rates": rates, "t_go": t_go, "t_end": time.time()}), flush=True)
        return 0
    if torch is None:
        gputime = None
        if os.environ.get("FLEETWATT_GPUTIME_DIR"):
            gputime = FakeGpuTime(os.environ["FLEETWATT_GPUTIME_DIR"], os.environ.get("FLEETWATT_GPUTIME_DUMP"))
        time.sleep(0.3)
        t_ready = time.time()
        if gputime:
            gputime.working = True
        time.sleep(args.iters * args.fake)
        if gputime:
            gputime.stop()
    else:
        run = build(args.kind, torch, args.burst)
        torch.cuda.synchronize()
        t_ready = time.time()
        run(args.iters)
    t_end = time.time()
    print(json.dumps({"kind": args.kind, "iters": args.iters, "t_go": t_go, "t_ready": t_ready, "t_end": t_end}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
