"""The torch baseline for the GPU replay benchmark (examples/gpu_bench.rs).

The same index check written with torch ops, `((t < 0) | (t >= n)).nonzero()`, on a 1 GiB int64
tensor of random token ids (three of them out of range) resident on the GPU, beside a
device-to-device copy of the same bytes, both timed with CUDA events (median of --reps after a
warm-up). Run it on the GPU machine in the same session as gpu_bench:

    python3 benches/gpu_torch_baseline.py [--mib 1024] [--reps 20]
"""

import argparse
import statistics

import torch

VOCAB = 50257


def median_ms(fn, reps):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()

    n_elems = (args.mib << 20) // 8
    gen = torch.Generator(device="cuda").manual_seed(2024)
    t = torch.randint(0, VOCAB, (n_elems,), dtype=torch.int64, device="cuda", generator=gen)
    t[torch.tensor([17, n_elems // 2, n_elems - 1], device="cuda")] = VOCAB + 3
    dst = torch.empty_like(t)
    nbytes = t.numel() * t.element_size()

    found = ((t < 0) | (t >= VOCAB)).nonzero()
    assert found.shape[0] == 3, found

    check_ms = median_ms(lambda: ((t < 0) | (t >= VOCAB)).nonzero(), args.reps)
    copy_ms = median_ms(lambda: dst.copy_(t), args.reps)
    check_gbps = nbytes / (check_ms * 1e6)
    copy_gbps = 2 * nbytes / (copy_ms * 1e6)

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'what':<40} {'ms':>9} {'GB/s':>9}")
    print(f"{'torch ((t < 0) | (t >= n)).nonzero()':<40} {check_ms:>9.3f} {check_gbps:>9.1f}")
    print(f"{'torch copy_ (read + write)':<40} {copy_ms:>9.3f} {copy_gbps:>9.1f}")
    print("GB/s of the check: tensor bytes over its time (as gpu_bench's scan GB/s).")


if __name__ == "__main__":
    main()
