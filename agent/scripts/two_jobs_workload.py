"""The two programs of the two-jobs experiment (docs/agent-h200.md), run on GPU 0 until SIGTERM.

heavy: an 8192 x 8192 fp16 matrix multiplied by itself 20 times, then a synchronize, in a loop.
light: holds 10 GiB and multiplies a 1024 x 1024 fp16 matrix once every 0.2 s.
--fake: no GPU; sleep in the same rhythm (the script's dry run, with the fake NVML).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

stop = False


def _stop(signum: int, frame: object) -> None:
    global stop
    stop = True


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["heavy", "light"])
    parser.add_argument("--fake", action="store_true")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if args.fake:
        print(f"{args.mode}: ready (fake)", flush=True)
        while not stop:
            time.sleep(0.05)
        return 0
    import torch

    dev = torch.device("cuda:0")
    if args.mode == "heavy":
        a = torch.randn(8192, 8192, dtype=torch.float16, device=dev)
        torch.cuda.synchronize()
        print("heavy: ready", flush=True)
        loops = 0
        while not stop:
            for _ in range(20):
                b = a @ a
            torch.cuda.synchronize()
            loops += 1
        del b
        print(f"heavy: {loops} loops", flush=True)
    else:
        hold = torch.empty(10 * 1024**3, dtype=torch.uint8, device=dev)
        x = torch.randn(1024, 1024, dtype=torch.float16, device=dev)
        torch.cuda.synchronize()
        print(f"light: ready, holding {hold.numel() / 2**30:.1f} GiB", flush=True)
        loops = 0
        while not stop:
            y = x @ x
            torch.cuda.synchronize()
            loops += 1
            time.sleep(0.2)
        del y
        print(f"light: {loops} products", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
