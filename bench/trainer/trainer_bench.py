"""PyTorch side of `easeml bench trainer` (embedded in the trainer library as
`easeml_trainer::bench::PYTHON_SCRIPT` and piped to `python -`).

The same architectures as the Rust side (easeml's ResNet-18: k/2 padding, ceil-mode 3x3/2 max pool after
the stem; and the small CNN), the same batch, input layout ([B,H,W,C] permuted to NCHW), optimizer
(Adam), device, autocast setting and thread count. Prints one JSON line: the torch version and lib
dir, and images/second for training and inference per model.
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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

    def forward(self, x):
        x = x.permute(0, 3, 1, 2).contiguous()
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

    def forward(self, x):
        x = x.permute(0, 3, 1, 2).contiguous()
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(model, device, batch, size, iterations, warmup, amp):
    x = torch.rand(batch, size, size, 3, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    autocast = lambda: torch.autocast(device_type="cuda", enabled=amp and device.type == "cuda")
    model.train()
    for step in range(warmup + iterations):
        if step == warmup:
            sync(device)
            start = time.perf_counter()
        with autocast():
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    sync(device)
    train = batch * iterations / (time.perf_counter() - start)
    model.eval()
    with torch.no_grad():
        for step in range(warmup + iterations):
            if step == warmup:
                sync(device)
                start = time.perf_counter()
            with autocast():
                model(x)
        sync(device)
    infer = batch * iterations / (time.perf_counter() - start)
    return train, infer


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
    parser.add_argument("--amp", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    results = {}
    for name in args.models.split(","):
        if name == "resnet18":
            model = ResNet18(3, 10, args.width)
        elif name == "small_cnn":
            model = SmallCnn(3, 10)
        else:
            raise SystemExit(f"unknown model {name}")
        model = model.to(device)
        results[name] = measure(model, device, args.batch, args.size, args.iterations, args.warmup, args.amp)
    print(json.dumps({
        "torch": torch.__version__,
        "lib_dir": os.path.join(os.path.dirname(torch.__file__), "lib"),
        "results": results,
    }))


if __name__ == "__main__":
    main()
