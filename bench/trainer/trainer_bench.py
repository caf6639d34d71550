"""PyTorch side of `easeml bench trainer` (embedded in the bench harness as `measure::PYTHON_SCRIPT`
and piped to `python -`).

The same architectures as the Rust side (easeml's ResNet-18: k/2 padding, ceil-mode 3x3/2 max pool after
the stem; and the small CNN), the same batch, input layout ([B,H,W,C] permuted to NCHW), optimizer
(Adam), device, autocast setting and thread count, set up as a performance-minded PyTorch user would
(issue 47): cuDNN's autotuner on (CUDA), Adam's fused kernel (where this torch has it), and one of
three peers (`--peer`):
- `eager`: that, in float32;
- `amp`: plus bfloat16 autocast and channels-last tensors (the model's weights and its input);
- `compile`: plus `torch.compile(mode="reduce-overhead")` (CUDA graphs on CUDA; on the CPU
  Inductor's kernels). Its compile time (the untimed first steps) is reported apart.
`--amp DTYPE` (the mixed-precision rows) is autocast to DTYPE (`bfloat16` or `float16`), the type
easeml's own mixed precision uses on the device.
Prints one JSON line: the torch version and lib dir, images/second for training and inference per
model, and the seconds of the untimed first steps per model (`warmup_seconds`: compile time and all).
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def to_nchw(x, channels_last):
    """[B,H,W,C] images as the NCHW tensor a convolution takes: contiguous NCHW, or NHWC in memory
    (channels-last) for the `amp` peer, whose weights are channels-last too."""
    x = x.permute(0, 3, 1, 2)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x.contiguous()


class Block(nn.Module):
    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv0 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn0 = nn.BatchNorm2d(planes)
        self.conv1 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.down = None
        if stride != 1 or cin != planes:
            self.down = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, 0, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        y = F.relu(self.bn0(self.conv0(x)))
        y = self.bn1(self.conv1(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet18(nn.Module):
    def __init__(self, channels, classes, width):
        super().__init__()
        s = lambda c: max(8, round(c * width))
        self.stem = nn.Conv2d(channels, s(64), 7, 2, 3, bias=False)
        self.bn = nn.BatchNorm2d(s(64))
        blocks, cin = [], s(64)
        for stage, planes in enumerate([64, 128, 256, 512]):
            for index in range(2):
                stride = 2 if stage > 0 and index == 0 else 1
                blocks.append(Block(cin, s(planes), stride))
                cin = s(planes)
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)
        self.channels_last = False

    def forward(self, x):
        x = to_nchw(x, self.channels_last)
        x = F.relu(self.bn(self.stem(x)))
        x = F.max_pool2d(x, 3, 2, 0, ceil_mode=True)
        x = self.blocks(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class SmallCnn(nn.Module):
    def __init__(self, channels, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 32, 3, 1, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1, 1)
        self.fc = nn.Linear(64, classes)
        self.channels_last = False

    def forward(self, x):
        x = to_nchw(x, self.channels_last)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def adam(model):
    """Adam with its fused kernel where this torch has one for the device, else the default."""
    try:
        return torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(model.parameters(), lr=1e-3)


def autocast_for(device, amp, peer):
    """The autocast context of a step: `--amp`'s type, else bfloat16 for the `amp` peer."""
    if amp:
        return lambda: torch.autocast(device_type=device.type, dtype=getattr(torch, amp))
    if peer == "amp":
        return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return lambda: torch.autocast(device_type=device.type, enabled=False)


def measure(model, device, batch, size, iterations, warmup, amp, peer):
    x = torch.rand(batch, size, size, 3, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    # The amp peer's channels-last layout: the weights here, the input in the model's forward.
    model.channels_last = peer == "amp"
    if model.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = adam(model)
    autocast = autocast_for(device, amp, peer)
    step_model = torch.compile(model, mode="reduce-overhead") if peer == "compile" else model
    model.train()
    began = time.perf_counter()
    warmup_seconds = 0.0
    for step in range(warmup + iterations):
        if step == warmup:
            sync(device)
            start = time.perf_counter()
            warmup_seconds += start - began
        with autocast():
            logits = step_model(x)
        loss = F.cross_entropy(logits.float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    sync(device)
    train = batch * iterations / (time.perf_counter() - start)
    model.eval()
    began = time.perf_counter()
    with torch.no_grad():
        for step in range(warmup + iterations):
            if step == warmup:
                sync(device)
                start = time.perf_counter()
                warmup_seconds += start - began
            with autocast():
                step_model(x)
        sync(device)
    infer = batch * iterations / (time.perf_counter() - start)
    return train, infer, warmup_seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--width", type=float, default=1.0)
    parser.add_argument("--models", default="resnet18,small_cnn")
    parser.add_argument("--amp", choices=["bfloat16", "float16"], default=None)
    parser.add_argument("--peer", choices=["eager", "amp", "compile"], default="eager")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    results, warmup_seconds = {}, {}
    for name in args.models.split(","):
        if name == "resnet18":
            model = ResNet18(3, 10, args.width)
        elif name == "small_cnn":
            model = SmallCnn(3, 10)
        else:
            raise SystemExit(f"unknown model {name}")
        model = model.to(device)
        train, infer, warmup = measure(
            model, device, args.batch, args.size, args.iterations, args.warmup, args.amp, args.peer
        )
        results[name] = (train, infer)
        warmup_seconds[name] = warmup
    print(json.dumps({
        "torch": torch.__version__,
        "lib_dir": os.path.join(os.path.dirname(torch.__file__), "lib"),
        "peer": args.peer,
        "results": results,
        "warmup_seconds": warmup_seconds,
    }))


if __name__ == "__main__":
    main()
