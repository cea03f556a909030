"""A small PyTorch training loop for tests/gpu/run.sh: DDP over NCCL, one rank per GPU (run it
under torchrun for several; with one rank NCCL never calls its profiler plugin), steps marked with
NVTX ranges "step N" (or, with --marks podscope, with podscope_step from PYTHONPATH=<kit>/lib;
with --marks none, not at all).
Writes each step's wall-clock start and duration (ns) to --out as JSON ("{rank}" in the path is
replaced by the rank), for the overhead figures.

    python3 tests/gpu/train_loop.py --seconds 15 --out steps.json
    torchrun --standalone --nproc-per-node 8 tests/gpu/train_loop.py --out steps-{rank}.json
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn



def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--out", required=True)
    parser.add_argument("--width", type=int, default=4096)
    # none: no step marks at all; the analyses find the steps from the kernel launches' period.
    parser.add_argument("--marks", choices=["nvtx", "podscope", "none"], default="nvtx")
    args = parser.parse_args()
    podscope_step = None
    if args.marks == "podscope":
        import podscope_step

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    model = nn.Sequential(*[nn.Sequential(nn.Linear(args.width, args.width), nn.GELU()) for _ in range(6)]).cuda()
    model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    batch = torch.randn(256, args.width, device="cuda")

    steps = []
    end = time.time() + args.seconds
    step = 0
    while time.time() < end:
        torch.cuda.synchronize()
        start = time.time_ns()
        if podscope_step:
            podscope_step.begin(step)
        elif args.marks == "nvtx":
            torch.cuda.nvtx.range_push(f"step {step}")
        optimizer.zero_grad(set_to_none=True)
        loss = model(batch).square().mean()
        loss.backward()
        optimizer.step()
        if podscope_step:
            podscope_step.end(step)
        elif args.marks == "nvtx":
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        steps.append({"step": step, "start_ns": start, "duration_ns": time.time_ns() - start})
        step += 1
    dist.destroy_process_group()
    with open(args.out.replace("{rank}", os.environ["RANK"]), "w") as f:
        json.dump(steps, f)
    print(f"train_loop: {len(steps)} steps")


if __name__ == "__main__":
    main()
